from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack

import boto3
import fsspec
import pytest
from moto.server import ThreadedMotoServer

from eval_pipeline.testing.postgres import PostgresUnavailable, postgres_server

BUCKET = "eval-outputs"


@pytest.fixture(scope="module")
def postgres() -> Iterator[str]:
    """A Postgres server for the module's tests (each test file gets its own: xdist runs files
    on different workers); skipped, saying why, only where the embedded server cannot run."""
    with ExitStack() as stack:
        try:
            admin_url = stack.enter_context(postgres_server())
        except PostgresUnavailable as exc:
            pytest.skip(str(exc))
        yield admin_url


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture(scope="module")
def s3(s3_endpoint: str) -> Iterator[str]:
    """The bucket, for the module's tests; credentials and endpoint reach s3fs as they would in
    production, from the standard AWS variables. Each test writes under a prefix of its own."""
    with pytest.MonkeyPatch.context() as environment:
        for name, value in {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ENDPOINT_URL": s3_endpoint,
        }.items():
            environment.setenv(name, value)
        # s3fs keeps its filesystems per class, each made with the endpoint of its day: one made
        # for another module's (stopped) server on this worker would still point at it.
        s3_filesystems = fsspec.get_filesystem_class("s3")
        s3_filesystems.clear_instance_cache()
        boto3.client("s3", endpoint_url=s3_endpoint).create_bucket(Bucket=BUCKET)
        yield f"s3://{BUCKET}"
        s3_filesystems.clear_instance_cache()

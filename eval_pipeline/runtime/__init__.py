"""What runs under Dagster, below the definitions: the supervision of runs whose process is gone,
waiting for a pool slot, queries of the instance, and the one adapter to Dagster's private
modules. `defs/` and `orchestration/` use it; it imports neither."""

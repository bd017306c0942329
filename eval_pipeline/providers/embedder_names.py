"""The offline embedders' names, in a module of their own: the models file is read (every `run`,
an unchanged rerun included) without importing onnxruntime, numpy and the tokenizer."""

LOCAL_EMBEDDER_NAME = "local-minilm-l6-int8"
STATIC_EMBEDDER_NAME = "static-minilm-l6"

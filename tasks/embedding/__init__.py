"""Embedding: the embedder spec, the local model (windows, precision, ONNX queries) and Voyage."""

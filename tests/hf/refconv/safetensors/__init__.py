"""Stand-in for the safetensors package (Debian 12 has none): only safetensors.torch.load_file,
which EmbeddingGemma's generate_extra_tensors imports (conversion/gemma.py) before it reads its
sentence-transformers Dense layers."""

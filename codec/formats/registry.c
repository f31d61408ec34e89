/*
 * registry.c - the formats tensorfs reads, in the order tfs_model_open asks their probes
 * (format.h): the first sure one takes a source, else the first that guesses.  GGUF first
 * (its magic, or its name, decides), then Ollama (a manifest, or a model name), then
 * safetensors (a directory, an index, and any other file as a guess).
 */
#include "format.h"

const tfs_format_ops *const tfs_formats[] = {
	&tfs_gguf_format,
	&tfs_ollama_format,
	&tfs_safetensors_format,
	NULL,
};

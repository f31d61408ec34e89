/*
 * tensorfs.h - the format library behind tensorfs (public interface): the umbrella of
 * the public headers of codec/, which fs/ and the tests include.
 *
 * codec/ knows nothing of FUSE.  It opens a model source (GGUF, safetensors,
 * a sharded safetensors set, an Ollama store entry) into one format-neutral,
 * mutable in-memory model: metadata keys, tensors, extra files (Ollama
 * layers), and the source files their bytes live in.  The same model can be
 * changed and serialized again in the source's format.
 *
 * Conventions (libgit2 style):
 *  - functions return 0 / a negative tfs_code, out-params come first, and
 *    fill a caller-provided tfs_error with a message naming the file and
 *    the problem; TFS_PASSTHROUGH (positive) is not an error: "not mine, use
 *    the fallback";
 *  - every _open has one _free; getters return pointers borrowed until the
 *    model is freed or changed.
 *
 * Each layer's folder has its headers (base/base.h, num/dtype.h, model/model.h, ...);
 * those not included here are private to codec/ (the tests may include them too).
 */
#ifndef TENSORFS_H
#define TENSORFS_H

#include "base/base.h"
#include "base/io.h"
#include "num/dtype.h"
#include "num/quant.h"
#include "num/mlx_math.h"
#include "net/scheme.h"
#include "model/value.h"
#include "model/source.h"
#include "model/model.h"
#include "model/npy.h"
#include "model/requant.h"
#include "model/names.h"
#include "model/index.h"
#include "model/image.h"
#include "model/edit.h"
#include "formats/open.h"
#include "formats/imatrix.h"
#include "views/view.h"
#include "views/quantize.h"
#include "journal/write.h"
#include "journal/staging.h"
#include "journal/session.h"

#endif

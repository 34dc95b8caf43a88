/* The backend ABI of `lathe serve`: a narrow, versioned C interface.
 *
 * A backend is a shared library (liblathe_backend_<name>.so) that `lathe serve`
 * opens with dlopen only when a model names it. It exports ONE symbol:
 *
 *     int lathe_backend_init(uint32_t host_api_version, LatheBackendApi* api,
 *                            LatheError* err);
 *
 * The host passes the API version it speaks; a backend that supports it fills
 * `api` (the host zeroes it first and sets api->struct_size) and returns 0. A
 * backend that does not returns non-zero with `err` set, and the host reports
 * both versions. New optional entry points are only ever appended to the table,
 * and a new LATHE_BACKEND_API_VERSION is made only for incompatible changes.
 *
 * Only C types cross this boundary: no C++ objects, no exceptions (a backend
 * catches everything and returns an error), no memory freed on the other side.
 *
 * Lifecycle of one model instance (one per `instances[].count`, each bound to a
 * device and driven by its own host thread):
 *     load  ->  [warmup]  ->  execute*  ->  unload
 * Required: load, execute, unload. Optional (may be NULL): warmup, describe.
 *
 * Threads: calls on one instance never overlap. They are made on the instance's
 * thread, except execute on an instance whose runs_inline answers non-zero,
 * which may also be called from the thread that dispatched the batch. Calls on
 * different instances of the same backend may run concurrently.
 *
 * Tensors: row-major, little-endian. BYTES tensors hold each element as a
 * 4-byte little-endian length followed by that many bytes, exactly as the KServe
 * v2 binary tensor extension does. When the model batches (max_batch_size > 0),
 * dimension 0 of every input is the batch: the host has concatenated the
 * requests, and it splits each output along dimension 0 again, so every output
 * must have the batch size as its first dimension.
 *
 * The reserved tensor name "__json__" (BYTES, shape [batch]) carries one JSON
 * document per request for `POST /predict`: a backend that serves plain JSON
 * answers with an output of the same name and shape.
 */
#ifndef LATHE_SERVE_BACKEND_API_H_
#define LATHE_SERVE_BACKEND_API_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LATHE_BACKEND_API_VERSION 1u
#define LATHE_BACKEND_INIT_SYMBOL "lathe_backend_init"
#define LATHE_JSON_TENSOR_NAME "__json__"

/* KServe v2 datatypes. Values are stable. */
typedef enum LatheDataType {
  LATHE_TYPE_INVALID = 0,
  LATHE_TYPE_BOOL = 1,
  LATHE_TYPE_UINT8 = 2,
  LATHE_TYPE_UINT16 = 3,
  LATHE_TYPE_UINT32 = 4,
  LATHE_TYPE_UINT64 = 5,
  LATHE_TYPE_INT8 = 6,
  LATHE_TYPE_INT16 = 7,
  LATHE_TYPE_INT32 = 8,
  LATHE_TYPE_INT64 = 9,
  LATHE_TYPE_FP16 = 10,
  LATHE_TYPE_FP32 = 11,
  LATHE_TYPE_FP64 = 12,
  LATHE_TYPE_BYTES = 13,
  LATHE_TYPE_BF16 = 14
} LatheDataType;

/* How a call failed. The host maps them to HTTP: INVALID_ARGUMENT 400,
 * NOT_FOUND 404, UNAVAILABLE 503 (e.g. a worker process died), others 500. */
typedef enum LatheErrorCode {
  LATHE_OK = 0,
  LATHE_ERR_INVALID_ARGUMENT = 1,
  LATHE_ERR_NOT_FOUND = 2,
  LATHE_ERR_UNAVAILABLE = 3,
  LATHE_ERR_INTERNAL = 4,
  LATHE_ERR_UNSUPPORTED = 5,
  LATHE_ERR_PERMISSION_DENIED = 6
} LatheErrorCode;

/* Filled by the backend when a call returns non-zero. Host-owned storage; the
 * message is NUL-terminated and truncated to fit.
 *
 * The first line of the message is a summary that the host may send to the
 * client (e.g. "input 'x': expected 4 features, got 3"); it must not carry a
 * traceback, source paths or anything else only the operator should see.
 * Further lines (a traceback, the runtime's full error) go to the server's
 * log only. An error that the request's tensors caused — a shape or datatype
 * the model does not take, a value out of its range — is
 * LATHE_ERR_INVALID_ARGUMENT, so the client gets a 400 and not a 500. */
typedef struct LatheError {
  int32_t code; /* LatheErrorCode */
  char message[4096];
} LatheError;

/* A tensor the host lends to the backend for the duration of one call. */
typedef struct LatheTensor {
  const char* name;
  int32_t datatype; /* LatheDataType */
  int32_t rank;
  const int64_t* shape;
  const void* data;
  uint64_t byte_size;
} LatheTensor;

/* Where execute puts its outputs. `alloc` returns a host-owned buffer of exactly
 * `byte_size` bytes into which the backend writes the output `name`; the host
 * keeps it after execute returns. It returns NULL when the output cannot be
 * accepted (a name given twice, a byte_size that does not match the shape):
 * the backend then fails the call. */
typedef struct LatheOutputSink {
  void* ctx;
  void* (*alloc)(void* ctx, const char* name, int32_t datatype, int32_t rank, const int64_t* shape,
                 uint64_t byte_size);
} LatheOutputSink;

/* Everything a backend needs to load one instance. Strings are host-owned and
 * valid only during load (copy what you keep). */
typedef struct LatheInstanceSpec {
  uint32_t struct_size; /* sizeof(LatheInstanceSpec) of the host */
  const char* model_name;
  int64_t model_version;
  const char* model_dir;   /* <repository>/<model> */
  const char* version_dir; /* <repository>/<model>/<version> */
  const char* model_file;  /* the version's model file (may not exist for `process`) */
  const char* config_json; /* the whole validated config.yaml, as JSON */
  const char* device_kind; /* "cpu" | "cuda" */
  int32_t device_index;    /* among the visible CUDA devices; -1 for cpu */
  int32_t instance_index;  /* 0..count-1 over all the model's instances */
  int32_t threads;         /* intra-op threads for this instance (>= 1; 0 = backend default) */
  int32_t max_batch_size;  /* 0: the model does not batch */
} LatheInstanceSpec;

typedef struct LatheBackendApi {
  uint32_t struct_size;        /* set by the host to sizeof(LatheBackendApi) */
  uint32_t api_version;        /* set by the backend to the version it implements */
  const char* name;            /* static string, e.g. "torchscript" */
  const char* runtime_version; /* static string, e.g. "libtorch 1.13.1" */

  /* Required. Loads one instance; on success *instance is the backend's handle,
   * owned by the backend until unload. */
  int (*load)(const LatheInstanceSpec* spec, void** instance, LatheError* err);
  /* Required. Runs one batch. The inputs are lent for the call. */
  int (*execute)(void* instance, const LatheTensor* inputs, uint32_t input_count,
                 const LatheOutputSink* sink, LatheError* err);
  /* Required. Releases the instance; never fails. */
  void (*unload)(void* instance);

  /* Optional. Runs backend-specific warm-up on a sample batch (e.g. to let a JIT
   * specialise). When NULL the host calls execute with the sample instead. */
  int (*warmup)(void* instance, const LatheTensor* inputs, uint32_t input_count, LatheError* err);
  /* Optional. Writes what the backend can tell about the model's tensors, as a
   * NUL-terminated JSON object into `json` (at most `capacity` bytes):
   *   {"inputs": [{"name": "x", "datatype": "FP32"|"", "dims": [..]|null}],
   *    "outputs": [...]}
   * Used when config.yaml leaves inputs/outputs out. */
  int (*describe)(void* instance, char* json, uint64_t capacity, LatheError* err);

  /* Appended after the first release: a backend sets it only when the host's
   * api->struct_size reaches past it (an older host has no room for it). */

  /* Optional. Non-zero when execute on this instance is cheap and never blocks
   * (microseconds: no I/O, no sleep, no lock held for long). The host may then
   * run a batch on the thread that dispatched it, an HTTP I/O thread, instead
   * of handing it to the instance's thread and back: two thread wake-ups less
   * per batch. Asked once, on the instance's thread, right after load. */
  int (*runs_inline)(void* instance);
} LatheBackendApi;

typedef int (*LatheBackendInitFn)(uint32_t host_api_version, LatheBackendApi* api, LatheError* err);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* LATHE_SERVE_BACKEND_API_H_ */

/*===- fsdprt.h - C ABI of the fsdp runtime ----------------------*- C -*-===*\
|*                                                                            *|
|* What compiled training steps call. A generated step is a flat sequence of  *|
|* calls on int64 handles and scalars, so:                                    *|
|*  - every function returns an int32 status (FSDPRT_OK == 0); results come  *|
|*    back through out-pointers; fsdprt_last_error() describes the last      *|
|*    failure on the calling thread;                                          *|
|*  - contexts, buffers, streams, events, checkpoint readers and writers are *|
|*    int64 handles; 0 is never a valid handle, so an optional tensor         *|
|*    operand is passed as buffer 0;                                          *|
|*  - a tensor operand is (buffer handle, byte offset); its extent follows   *|
|*    from the op's dims and the dtype code, and is bounds-checked;           *|
|*  - kernels are enqueued on a stream and run asynchronously; argument      *|
|*    errors are returned at once, data-dependent errors (an out-of-range    *|
|*    token id) are returned by the next synchronize, naming the op.         *|
|* See docs/Runtime.md for the full contract.                                 *|
\*===----------------------------------------------------------------------===*/
#ifndef FSDP_RT_FSDPRT_H
#define FSDP_RT_FSDPRT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes. */
enum {
  FSDPRT_OK = 0,
  FSDPRT_ERR_INVALID_ARGUMENT = 1, /* bad dims, dtype, option, null pointer */
  FSDPRT_ERR_INVALID_HANDLE = 2,   /* unknown, destroyed or freed handle */
  FSDPRT_ERR_OUT_OF_MEMORY = 3,    /* the arena cannot hold the buffer */
  FSDPRT_ERR_OUT_OF_RANGE = 4,     /* tensor extent past its buffer; bad ids */
  FSDPRT_ERR_IO = 5,               /* file system or network failure, */
                                   /* collective or rendezvous timeout */
  FSDPRT_ERR_FORMAT = 6,           /* malformed checkpoint file */
  FSDPRT_ERR_UNSUPPORTED = 7,      /* valid request this backend cannot do */
  FSDPRT_ERR_INTERNAL = 8
};

/* Dtype codes (stable: generated code embeds them). */
enum {
  FSDPRT_F32 = 0,
  FSDPRT_BF16 = 1,
  FSDPRT_F16 = 2,
  FSDPRT_I32 = 3,
  FSDPRT_I64 = 4
};

/* nn op option codes. MAX / MIN are torch.maximum / minimum (a NaN      */
/* operand wins); MAX_WEIGHT is d max(a, b) / da: 1 where a > b (or either */
/* is NaN), 1/2 where a == b, 0 where a < b (torch's subgradient); the     */
/* weight of b is MAX_WEIGHT with the operands swapped; MIN_WEIGHT alike.  */
/* KEEP is a where b != 0, else 0 (torch.where's branches: keep(x, m) +    */
/* keep(y, 1 - m), whatever the unselected side holds); LT ... NE are the   */
/* comparisons, 1 where true and 0 where false (NaN: only NE is true).      */
/* FLOOR_DIV (integers only) rounds the quotient down; a zero divisor      */
/* gives 0. FMOD (floats only) is C's fmod, a − trunc(a / b)·b computed    */
/* exactly, with a's sign (torch.fmod; NaN where b is 0).                  */
enum {
  FSDPRT_ADD = 0,
  FSDPRT_SUB = 1,
  FSDPRT_MUL = 2,
  FSDPRT_DIV = 3,
  FSDPRT_MAX = 4,
  FSDPRT_MIN = 5,
  FSDPRT_MAX_WEIGHT = 6,
  FSDPRT_MIN_WEIGHT = 7,
  FSDPRT_KEEP = 8,
  FSDPRT_LT = 9,
  FSDPRT_LE = 10,
  FSDPRT_GT = 11,
  FSDPRT_GE = 12,
  FSDPRT_EQ = 13,
  FSDPRT_NE = 14,
  FSDPRT_FLOOR_DIV = 15,
  FSDPRT_FMOD = 16
};
enum {
  FSDPRT_RELU = 0,
  FSDPRT_GELU = 1,      /* approximate = "none" (erf) */
  FSDPRT_GELU_TANH = 2, /* approximate = "tanh" */
  FSDPRT_SILU = 3
};
/* Pointwise math of fsdprt_unary_*; a, b are POW's exponent and CLAMP's */
/* bounds (math/Unary.h has the formulas). */
enum {
  FSDPRT_UNARY_TANH = 0,
  FSDPRT_UNARY_SIGMOID = 1,
  FSDPRT_UNARY_EXP = 2,
  FSDPRT_UNARY_LOG = 3,
  FSDPRT_UNARY_SQRT = 4,
  FSDPRT_UNARY_RSQRT = 5,
  FSDPRT_UNARY_ABS = 6,
  FSDPRT_UNARY_POW = 7,
  FSDPRT_UNARY_CLAMP = 8,
  FSDPRT_UNARY_ERF = 9,
  FSDPRT_UNARY_SIN = 10,
  FSDPRT_UNARY_COS = 11,
  FSDPRT_UNARY_ACOS = 12,
  FSDPRT_UNARY_ASIN = 13,
  FSDPRT_UNARY_ATAN = 14
};
enum { FSDPRT_REDUCE_SUM = 0, FSDPRT_REDUCE_MEAN = 1 };
enum { FSDPRT_LOSS_MEAN = 0, FSDPRT_LOSS_SUM = 1 };
enum { FSDPRT_RNG_UNIFORM = 0, FSDPRT_RNG_NORMAL = 1 };
/* Collective reduction ops (reduce_scatter: SUM, AVG; all_reduce: all). */
enum { FSDPRT_COMM_SUM = 0, FSDPRT_COMM_AVG = 1, FSDPRT_COMM_MAX = 2 };

#define FSDPRT_MAX_RANK 8

/* ---- Errors --------------------------------------------------------------*/
/* Message of the last failed call on this thread ("" if none). Valid until */
/* the next failing call on this thread. */
const char *fsdprt_last_error(void);

/* ---- Context -------------------------------------------------------------*/
/* backend: "cpu" (others register by name). num_threads <= 0 means one per */
/* hardware thread. The arena holds every buffer of this rank. */
int32_t fsdprt_context_create(const char *backend, int32_t rank,
                              int32_t world_size, int64_t arena_bytes,
                              int32_t num_threads, int64_t *out_ctx);
int32_t fsdprt_context_destroy(int64_t ctx);
int32_t fsdprt_context_rank(int64_t ctx, int32_t *out);
int32_t fsdprt_context_world_size(int64_t ctx, int32_t *out);
/* Highest sum of live buffer bytes, and highest end offset in the arena. */
int32_t fsdprt_arena_high_water(int64_t ctx, int64_t *out_bytes,
                                int64_t *out_extent);
int32_t fsdprt_arena_in_use(int64_t ctx, int64_t *out_bytes);
/* Restarts both high-water marks from what is in use now, and the device's. */
int32_t fsdprt_arena_reset_high_water(int64_t ctx);
/* The most device memory the backend held at once (the arena, the GEMM */
/* workspaces and the per-call scratch such as cuDNN workspaces and f32 */
/* staging), plus what the communicators hold (fsdprt_comm_device_bytes); */
/* -1 where it is not tracked (the CPU backend). */
int32_t fsdprt_device_high_water(int64_t ctx, int64_t *out_bytes);
/* Device memory the context's communicators hold, each measured around */
/* its creation (NCCL's buffers); 0 for host communicators (Gloo). */
int32_t fsdprt_comm_device_bytes(int64_t ctx, int64_t *out_bytes);
/* What of the device's high-water mark the backend holds beside the arena */
/* between calls, each counted once: GEMM workspaces, and the per-call */
/* scratch reserves (sized by the largest call so far: after a step, by the */
/* step's largest call, *out_op naming its operation, "" if none; valid */
/* until this thread's next call of this function); -1 where not tracked. */
int32_t fsdprt_device_reserve(int64_t ctx, int64_t *out_gemm_workspace_bytes,
                              int64_t *out_scratch_bytes, const char **out_op);
/* Added to every fsdprt_buffer_alloc_at offset from now on (a multiple of */
/* FSDPRT_ARENA_ALIGNMENT, default 0): runs a second compiled program, e.g. */
/* an evaluation, in the arena after the first's persistent buffer. */
int32_t fsdprt_context_set_arena_base(int64_t ctx, int64_t base);
/* Waits for every stream; returns (and clears) the first stream error. */
int32_t fsdprt_context_synchronize(int64_t ctx);
/* The learning-rate schedule's factor for the optimizer calls issued from */
/* now on (default 1): they apply lr x factor, as LambdaLR multiplies each */
/* group's initial lr. Finite and >= 0. */
int32_t fsdprt_context_set_lr_factor(int64_t ctx, double factor);
/* The dynamic loss scale of the steps issued from now on (default 1), */
/* written by fsdprt_loss_scale: finite and > 0. */
int32_t fsdprt_context_set_loss_scale(int64_t ctx, double scale);

/* ---- Step graphs (CUDA graphs of a whole step) ---------------------------*/
/* Between begin and end, the operations issued on every stream of the     */
/* context are captured into one graph instead of run (nothing runs: the   */
/* step's effects happen at each launch). A launch replays the graph on     */
/* `stream` with the values a step takes anew: step_count (optimizer bias  */
/* corrections, RNG keys: offset from the captured step's), the lr factor  */
/* and the loss scale set at the time of the launch. Begin synchronises    */
/* the context; FSDPRT_ERR_UNSUPPORTED where the backend has no graphs     */
/* (cpu). While capturing, stream and context synchronisation wait for the */
/* issue only. End fails, ending the capture, when the step could not be   */
/* captured (a host wait inside it: a copy to or from host memory, a       */
/* collective that syncs); run the step eagerly then. A graph's addresses  */
/* are those of its capture: the same buffers (the compiler's plan places  */
/* them) at every launch, the streams' per-call scratch included: issue   */
/* nothing on the context's other streams until a launch has completed     */
/* (synchronise the context, as fsdp-run does after each step).            */
int32_t fsdprt_graph_begin(int64_t ctx, int64_t step_count);
/* *out = 1 where the context's backend captures step graphs, else 0. */
int32_t fsdprt_graph_supported(int64_t ctx, int32_t *out);
int32_t fsdprt_graph_end(int64_t ctx, int64_t *out_graph);
int32_t fsdprt_graph_launch(int64_t ctx, int64_t stream, int64_t graph,
                            int64_t step_count);
int32_t fsdprt_graph_destroy(int64_t ctx, int64_t graph);

/* ---- Buffers (per-rank arena) -------------------------------------------*/
/* Every buffer starts at a multiple of this and its size is rounded up to  */
/* it; the compiler's memory plan counts bytes the same way. */
#define FSDPRT_ARENA_ALIGNMENT 64
int32_t fsdprt_buffer_alloc(int64_t ctx, int64_t bytes, int64_t *out_buf);
/* Places the buffer at a planned arena offset (the compiler's memory plan). */
int32_t fsdprt_buffer_alloc_at(int64_t ctx, int64_t offset, int64_t bytes,
                               int64_t *out_buf);
/* A buffer in host memory, outside the arena (pinned on GPUs, so copies   */
/* between it and the device are asynchronous): CPU offload's parameters,  */
/* gradients and optimizer state. fsdprt_copy between it and arena buffers */
/* is ordered on its stream like device work; kernels on a host stream     */
/* (fsdprt_stream_create_host) read and write it. */
int32_t fsdprt_buffer_alloc_host(int64_t ctx, int64_t bytes, int64_t *out_buf);
/* Stream-ordered free: the handle is invalid at once, the bytes return to */
/* the arena when the stream reaches this point. */
int32_t fsdprt_buffer_free(int64_t ctx, int64_t stream, int64_t buf);
int32_t fsdprt_buffer_size(int64_t ctx, int64_t buf, int64_t *out_bytes);
/* Host address of buffer bytes (host-memory backends only). */
int32_t fsdprt_buffer_host_ptr(int64_t ctx, int64_t buf, int64_t offset,
                               void **out_ptr);

/* Stream-ordered copies. The host memory must stay valid until the stream */
/* has executed the copy. */
int32_t fsdprt_copy_from_host(int64_t ctx, int64_t stream, int64_t dst,
                              int64_t dst_off, const void *src, int64_t bytes);
int32_t fsdprt_copy_to_host(int64_t ctx, int64_t stream, void *dst, int64_t src,
                            int64_t src_off, int64_t bytes);
int32_t fsdprt_copy(int64_t ctx, int64_t stream, int64_t dst, int64_t dst_off,
                    int64_t src, int64_t src_off, int64_t bytes);
int32_t fsdprt_fill(int64_t ctx, int64_t stream, int32_t dtype, int64_t dst,
                    int64_t dst_off, int64_t numel, double value);
/* dst += value on an I32/I64 tensor: integer counters such as BatchNorm's */
/* num_batches_tracked. */
int32_t fsdprt_add_integer(int64_t ctx, int64_t stream, int32_t dtype,
                           int64_t dst, int64_t dst_off, int64_t numel,
                           int64_t value);

/* ---- Streams and events -------------------------------------------------*/
/* Stream 1 is the context's default stream; more are created on demand. */
#define FSDPRT_DEFAULT_STREAM 1
int32_t fsdprt_stream_create(int64_t ctx, int64_t *out_stream);
/* A stream whose operations run on the host, with the CPU backend's       */
/* kernels, on host buffers (an arena buffer of a device backend is        */
/* refused); its waits on device work wait on the host. A context with one */
/* cannot capture step graphs. CPU offload runs the optimizer there. */
int32_t fsdprt_stream_create_host(int64_t ctx, int64_t *out_stream);
int32_t fsdprt_stream_destroy(int64_t ctx, int64_t stream);
int32_t fsdprt_stream_synchronize(int64_t ctx, int64_t stream);
int32_t fsdprt_event_create(int64_t ctx, int64_t *out_event);
int32_t fsdprt_event_destroy(int64_t ctx, int64_t event);
/* Captures the work enqueued on `stream` so far. */
int32_t fsdprt_event_record(int64_t ctx, int64_t event, int64_t stream);
/* Later work on `stream` waits for the event's latest record (no-op if the */
/* event was never recorded), as cudaStreamWaitEvent. */
int32_t fsdprt_stream_wait_event(int64_t ctx, int64_t stream, int64_t event);
int32_t fsdprt_event_synchronize(int64_t ctx, int64_t event);
int32_t fsdprt_event_query(int64_t ctx, int64_t event, int32_t *out_done);

/* ---- Tracing -------------------------------------------------------------*/
/* Names a stream in traces ("compute", "all-gather", ...). Defaults:       */
/* "default" for stream 1, "stream <n>" for the n-th stream of the context. */
int32_t fsdprt_stream_set_name(int64_t ctx, int64_t stream, const char *name);
/* While enabled, every operation a stream of the context runs (kernel,     */
/* collective, copy, fill, buffer_free, event_record, stream_wait_event) is */
/* recorded with its entry point's short name and its start and end time on */
/* the stream (steady clock, since context creation). Off by default; what  */
/* counts is whether it is on when the stream runs the op.                  */
int32_t fsdprt_trace_enable(int64_t ctx, int32_t enabled);
/* Writes the records so far (synchronise first to include everything      */
/* enqueued) as a Chrome trace {"traceEvents": [...]}: "X" events with      */
/* pid = `pid` (the rank) and tid = the stream's creation index, plus "M"   */
/* process_name "rank <pid>" and one thread_name per stream. The file is    */
/* replaced atomically; the records are kept (writing twice is fine).      */
int32_t fsdprt_trace_write(int64_t ctx, const char *path, int32_t pid);
/* Cumulative seconds `stream` has been blocked in stream_wait_event on     */
/* records not yet reached (work of other streams), tracing on or off: on   */
/* a compute stream waiting for all-gather / reduce-scatter streams this is */
/* the exposed communication time. Waits in progress are not included.     */
int32_t fsdprt_stream_wait_seconds(int64_t ctx, int64_t stream, double *out);

/* ---- Kernels -------------------------------------------------------------*/
/* Common prefix: (ctx, stream, dtype) where dtype is the storage type of   */
/* every floating-point operand (F32, BF16 or F16; compute is f32). A       */
/* tensor operand X is the pair (x, x_off). Shapes are row-major.          */

/* y[m,n] = x[m,k] * w[n,k]^T + b[n]; m is the product of x's leading dims. */
int32_t fsdprt_linear_forward(int64_t ctx, int64_t stream, int32_t dtype,
                              int64_t x, int64_t x_off, int64_t w,
                              int64_t w_off, int64_t b, int64_t b_off,
                              int64_t y, int64_t y_off, int64_t m, int64_t k,
                              int64_t n);
/* Any of dx, dw, db may be 0 (not needed). Outputs are overwritten. */
int32_t fsdprt_linear_backward(int64_t ctx, int64_t stream, int32_t dtype,
                               int64_t x, int64_t x_off, int64_t w,
                               int64_t w_off, int64_t dy, int64_t dy_off,
                               int64_t dx, int64_t dx_off, int64_t dw,
                               int64_t dw_off, int64_t db, int64_t db_off,
                               int64_t m, int64_t k, int64_t n);
/* pre = fsdprt_linear_forward(x, w, b?) and y = the tanh GELU of pre     */
/* (nn.linear_gelu). CPU: the two unfused kernels, their bits. CUDA: one  */
/* cuBLASLt GEMM with the GELU_AUX_BIAS epilogue where it applies, GELU   */
/* taken of the f32 accumulator (pre and y each rounded once).            */
int32_t fsdprt_linear_gelu_forward(int64_t ctx, int64_t stream, int32_t dtype,
                                   int64_t x, int64_t x_off, int64_t w,
                                   int64_t w_off, int64_t b, int64_t b_off,
                                   int64_t pre, int64_t pre_off, int64_t y,
                                   int64_t y_off, int64_t m, int64_t k,
                                   int64_t n);
/* fsdprt_linear_backward with dx (required) = the tanh GELU's gradient   */
/* at pre[m,k] of dy * w (nn.linear_gelu_grad); dw and db may be 0. CPU:  */
/* the two unfused kernels. CUDA: the dx GEMM with cuBLASLt's DGELU       */
/* epilogue where it applies (dy * w kept in f32, rounded once).          */
int32_t fsdprt_linear_gelu_backward(int64_t ctx, int64_t stream, int32_t dtype,
                                    int64_t x, int64_t x_off, int64_t w,
                                    int64_t w_off, int64_t dy, int64_t dy_off,
                                    int64_t pre, int64_t pre_off, int64_t dx,
                                    int64_t dx_off, int64_t dw, int64_t dw_off,
                                    int64_t db, int64_t db_off, int64_t m,
                                    int64_t k, int64_t n);

/* c[batch,m,n] = op(a) * op(b); a is [batch,m,k] ([batch,k,m] if trans_a), */
/* b is [batch,k,n] ([batch,n,k] if trans_b) or unbatched when b_batched=0. */
int32_t fsdprt_matmul_forward(int64_t ctx, int64_t stream, int32_t dtype,
                              int64_t a, int64_t a_off, int64_t b,
                              int64_t b_off, int64_t c, int64_t c_off,
                              int64_t batch, int64_t m, int64_t k, int64_t n,
                              int32_t trans_a, int32_t trans_b,
                              int32_t b_batched);

/* out = a (op) b with numpy trailing broadcasting; out has the broadcast */
/* shape (I32 / I64: ADD, SUB and MUL only, wrapping). Backward (floats,  */
/* ADD to DIV) sums over broadcast dims; da or db may be 0; maximum's and */
/* minimum's gradients are g times their weights.                         */
int32_t fsdprt_binary_forward(int64_t ctx, int64_t stream, int32_t dtype,
                              int32_t op, int64_t a, int64_t a_off,
                              int32_t a_rank, const int64_t *a_shape, int64_t b,
                              int64_t b_off, int32_t b_rank,
                              const int64_t *b_shape, int64_t out,
                              int64_t out_off);
/* y = factor * x; its backward is dx = factor * dy. */
int32_t fsdprt_scale_forward(int64_t ctx, int64_t stream, int32_t dtype,
                             int64_t x, int64_t x_off, int64_t y, int64_t y_off,
                             int64_t numel, double factor);

int32_t fsdprt_activation_forward(int64_t ctx, int64_t stream, int32_t dtype,
                                  int32_t kind, int64_t x, int64_t x_off,
                                  int64_t y, int64_t y_off, int64_t numel);
int32_t fsdprt_activation_backward(int64_t ctx, int64_t stream, int32_t dtype,
                                   int32_t kind, int64_t x, int64_t x_off,
                                   int64_t dy, int64_t dy_off, int64_t dx,
                                   int64_t dx_off, int64_t numel);

/* y = f(x; a, b) for an FSDPRT_UNARY_* kind; the backward reads x (not y) */
/* and writes dx = dy * f'(x; a, b). */
int32_t fsdprt_unary_forward(int64_t ctx, int64_t stream, int32_t dtype,
                             int32_t kind, int64_t x, int64_t x_off, int64_t y,
                             int64_t y_off, int64_t numel, double a, double b);
int32_t fsdprt_unary_backward(int64_t ctx, int64_t stream, int32_t dtype,
                              int32_t kind, int64_t x, int64_t x_off,
                              int64_t dy, int64_t dy_off, int64_t dx,
                              int64_t dx_off, int64_t numel, double a,
                              double b);

/* Normalisation over the last dim (size d) of rows x d. w, b optional. The */
/* backward recomputes the row statistics from x (nothing is saved). */
int32_t fsdprt_layer_norm_forward(int64_t ctx, int64_t stream, int32_t dtype,
                                  int64_t x, int64_t x_off, int64_t w,
                                  int64_t w_off, int64_t b, int64_t b_off,
                                  int64_t y, int64_t y_off, int64_t rows,
                                  int64_t d, double eps);
/* sum = a + b (same extents, rounded to dtype as fsdprt_binary_forward's */
/* add) and y = layer_norm(sum) as fsdprt_layer_norm_forward computes it */
/* from the stored sum, reading a and b once. */
int32_t fsdprt_add_layer_norm_forward(int64_t ctx, int64_t stream,
                                      int32_t dtype, int64_t a, int64_t a_off,
                                      int64_t b, int64_t b_off, int64_t w,
                                      int64_t w_off, int64_t bias,
                                      int64_t bias_off, int64_t sum,
                                      int64_t sum_off, int64_t y, int64_t y_off,
                                      int64_t rows, int64_t d, double eps);
int32_t fsdprt_layer_norm_backward(int64_t ctx, int64_t stream, int32_t dtype,
                                   int64_t x, int64_t x_off, int64_t w,
                                   int64_t w_off, int64_t dy, int64_t dy_off,
                                   int64_t dx, int64_t dx_off, int64_t dw,
                                   int64_t dw_off, int64_t db, int64_t db_off,
                                   int64_t rows, int64_t d, double eps);
/* fsdprt_layer_norm_backward with dx = addend + the input gradient, the */
/* gradient rounded to dtype first and the sum rounded as */
/* fsdprt_binary_forward's add (the bits of the two calls); addend and dx */
/* may be one buffer. */
int32_t fsdprt_add_layer_norm_backward(
    int64_t ctx, int64_t stream, int32_t dtype, int64_t x, int64_t x_off,
    int64_t w, int64_t w_off, int64_t dy, int64_t dy_off, int64_t addend,
    int64_t addend_off, int64_t dx, int64_t dx_off, int64_t dw, int64_t dw_off,
    int64_t db, int64_t db_off, int64_t rows, int64_t d, double eps);
int32_t fsdprt_rms_norm_forward(int64_t ctx, int64_t stream, int32_t dtype,
                                int64_t x, int64_t x_off, int64_t w,
                                int64_t w_off, int64_t y, int64_t y_off,
                                int64_t rows, int64_t d, double eps);
int32_t fsdprt_rms_norm_backward(int64_t ctx, int64_t stream, int32_t dtype,
                                 int64_t x, int64_t x_off, int64_t w,
                                 int64_t w_off, int64_t dy, int64_t dy_off,
                                 int64_t dx, int64_t dx_off, int64_t dw,
                                 int64_t dw_off, int64_t rows, int64_t d,
                                 double eps);

/* Softmax along `dim` of a rank-`rank` tensor; backward uses the output y. */
int32_t fsdprt_softmax_forward(int64_t ctx, int64_t stream, int32_t dtype,
                               int64_t x, int64_t x_off, int64_t y,
                               int64_t y_off, int32_t rank,
                               const int64_t *shape, int32_t dim);

/* out[i,:] = table[ids[i],:]; ids_dtype is I32 or I64. The backward */
/* overwrites dtable with the scatter-sum of dy in id order. */
int32_t fsdprt_embedding_forward(int64_t ctx, int64_t stream, int32_t dtype,
                                 int32_t ids_dtype, int64_t ids,
                                 int64_t ids_off, int64_t table,
                                 int64_t table_off, int64_t out,
                                 int64_t out_off, int64_t num_ids,
                                 int64_t vocab, int64_t dim);
int32_t fsdprt_embedding_backward(int64_t ctx, int64_t stream, int32_t dtype,
                                  int32_t ids_dtype, int64_t ids,
                                  int64_t ids_off, int64_t dy, int64_t dy_off,
                                  int64_t dtable, int64_t dtable_off,
                                  int64_t num_ids, int64_t vocab, int64_t dim);

/* q[B,Tq,H*D], k,v[B,Tk,Hkv*D] -> out[B,Tq,H*D]. scale <= 0 means */
/* 1/sqrt(D). causal masks key j > query i (top-left aligned). bias (0:  */
/* none) is added to the scaled scores before the softmax, an additive   */
/* mask or learned bias [bias_batch, bias_heads, Tq, Tk] with bias_batch */
/* 1 or B and bias_heads 1 or H (broadcast); the backward's dbias (0:    */
/* not wanted) is its gradient, summed over the broadcast dimensions.    */
/* q_row / kv_row: elements from one token's q (dq) / k, v (dk, dv) to   */
/* the next; 0 means contiguous (H*D, Hkv*D). Larger where q, k, v are   */
/* slices of one packed projection [B, T, (H + 2*Hkv)*D] (no copies).    */
/* stats (0: not wanted) gets the softmax statistics of the forward, an  */
/* f32 [B, H, Tq]: the log-sum-exp of each row of scaled, masked scores. */
/* Given to the backward with the forward's out (both or neither), they  */
/* spare it recomputing them (cuDNN re-ran the forward); its results are */
/* the same either way.                                                  */
int32_t fsdprt_attention_forward(int64_t ctx, int64_t stream, int32_t dtype,
                                 int64_t q, int64_t q_off, int64_t k,
                                 int64_t k_off, int64_t v, int64_t v_off,
                                 int64_t out, int64_t out_off, int64_t stats,
                                 int64_t stats_off, int64_t batch,
                                 int64_t tq, int64_t tk, int64_t heads,
                                 int64_t kv_heads, int64_t head_dim,
                                 int64_t q_row, int64_t kv_row,
                                 int32_t causal, double scale, int64_t bias,
                                 int64_t bias_off, int64_t bias_batch,
                                 int64_t bias_heads);
int32_t fsdprt_attention_backward(int64_t ctx, int64_t stream, int32_t dtype,
                                  int64_t q, int64_t q_off, int64_t k,
                                  int64_t k_off, int64_t v, int64_t v_off,
                                  int64_t dout, int64_t dout_off, int64_t out,
                                  int64_t out_off, int64_t stats,
                                  int64_t stats_off, int64_t dq,
                                  int64_t dq_off, int64_t dk, int64_t dk_off,
                                  int64_t dv, int64_t dv_off, int64_t batch,
                                  int64_t tq, int64_t tk, int64_t heads,
                                  int64_t kv_heads, int64_t head_dim,
                                  int64_t q_row, int64_t kv_row,
                                  int32_t causal, double scale, int64_t bias,
                                  int64_t bias_off, int64_t dbias,
                                  int64_t dbias_off, int64_t bias_batch,
                                  int64_t bias_heads);

/* Interleaved-pair rotary embedding on x[B,T,H*D], positions 0..T-1. */
int32_t fsdprt_rope_forward(int64_t ctx, int64_t stream, int32_t dtype,
                            int64_t x, int64_t x_off, int64_t y, int64_t y_off,
                            int64_t batch, int64_t seq, int64_t heads,
                            int64_t head_dim, double theta);
int32_t fsdprt_rope_backward(int64_t ctx, int64_t stream, int32_t dtype,
                             int64_t dy, int64_t dy_off, int64_t dx,
                             int64_t dx_off, int64_t batch, int64_t seq,
                             int64_t heads, int64_t head_dim, double theta);

/* Philox-keyed dropout; the backward recomputes the same mask. */
int32_t fsdprt_dropout_forward(int64_t ctx, int64_t stream, int32_t dtype,
                               int64_t x, int64_t x_off, int64_t y,
                               int64_t y_off, int64_t numel, double p,
                               int64_t seed, int64_t step, int64_t rng_id);

/* x[n,c,s] with s the product of spatial dims. w, b optional. Training */
/* updates running_mean/var in place; eval reads them. */
int32_t fsdprt_batch_norm_forward(int64_t ctx, int64_t stream, int32_t dtype,
                                  int64_t x, int64_t x_off, int64_t w,
                                  int64_t w_off, int64_t b, int64_t b_off,
                                  int64_t running_mean, int64_t rm_off,
                                  int64_t running_var, int64_t rv_off,
                                  int64_t y, int64_t y_off, int64_t n,
                                  int64_t c, int64_t spatial, double eps,
                                  double momentum, int32_t training);
/* In training mode x must be the forward input (batch stats recomputed). */
int32_t fsdprt_batch_norm_backward(
    int64_t ctx, int64_t stream, int32_t dtype, int64_t x, int64_t x_off,
    int64_t w, int64_t w_off, int64_t running_mean, int64_t rm_off,
    int64_t running_var, int64_t rv_off, int64_t dy, int64_t dy_off, int64_t dx,
    int64_t dx_off, int64_t dw, int64_t dw_off, int64_t db, int64_t db_off,
    int64_t n, int64_t c, int64_t spatial, double eps, int32_t training);

/* Convolution (conv1d is conv2d with h = kh = 1): x[n,c,h,w],           */
/* w[o,c/groups,kh,kw], b[o] optional, y[n,o,oh,ow]. `geometry` holds   */
/* FSDPRT_CONV_GEOMETRY_LEN values: n, c, h, w, o, kh, kw, oh, ow,      */
/* stride_h, stride_w, pad_h, pad_w (before), dilation_h, dilation_w,   */
/* groups; windows reaching past h or w read the zero padding after.    */
#define FSDPRT_CONV_GEOMETRY_LEN 16
int32_t fsdprt_conv_forward(int64_t ctx, int64_t stream, int32_t dtype,
                            int64_t x, int64_t x_off, int64_t w, int64_t w_off,
                            int64_t b, int64_t b_off, int64_t y, int64_t y_off,
                            const int64_t *geometry);
/* dx = the transposed convolution of dy with w. */
int32_t fsdprt_conv_backward_input(int64_t ctx, int64_t stream, int32_t dtype,
                                   int64_t dy, int64_t dy_off, int64_t w,
                                   int64_t w_off, int64_t dx, int64_t dx_off,
                                   const int64_t *geometry);
/* dw = x correlated with dy, summed over the batch. */
int32_t fsdprt_conv_backward_weight(int64_t ctx, int64_t stream, int32_t dtype,
                                    int64_t dy, int64_t dy_off, int64_t x,
                                    int64_t x_off, int64_t dw, int64_t dw_off,
                                    const int64_t *geometry);

/* Max pooling of x[n,c,h,w] into y[n,c,oh,ow] on the convolution's     */
/* geometry with o = groups = c and the window as kh, kw. The backward   */
/* routes dy to each window's first maximum (recomputed from x).         */
int32_t fsdprt_max_pool_forward(int64_t ctx, int64_t stream, int32_t dtype,
                                int64_t x, int64_t x_off, int64_t y,
                                int64_t y_off, const int64_t *geometry);
int32_t fsdprt_max_pool_backward(int64_t ctx, int64_t stream, int32_t dtype,
                                 int64_t x, int64_t x_off, int64_t dy,
                                 int64_t dy_off, int64_t dx, int64_t dx_off,
                                 const int64_t *geometry);

/* Element conversion between any two dtypes, as torch's: to a float   */
/* rounding to nearest even, float to integer truncating toward zero,   */
/* integer to integer wrapping.                                          */
int32_t fsdprt_cast(int64_t ctx, int64_t stream, int32_t src_dtype, int64_t src,
                    int64_t src_off, int32_t dst_dtype, int64_t dst,
                    int64_t dst_off, int64_t numel);
/* y = x.permute(perm); the backward permutes dy by the inverse. */
int32_t fsdprt_transpose_forward(int64_t ctx, int64_t stream, int32_t dtype,
                                 int64_t x, int64_t x_off, int64_t y,
                                 int64_t y_off, int32_t rank,
                                 const int64_t *shape, const int64_t *perm);
/* Split x along dim into parts of sizes[i] (outs[i], out_offs[i]); concat */
/* is its inverse and each is the other's backward. */
int32_t fsdprt_split(int64_t ctx, int64_t stream, int32_t dtype, int64_t x,
                     int64_t x_off, int32_t rank, const int64_t *shape,
                     int32_t dim, int32_t num_parts, const int64_t *sizes,
                     const int64_t *outs, const int64_t *out_offs);
int32_t fsdprt_concat(int64_t ctx, int64_t stream, int32_t dtype,
                      int32_t num_parts, const int64_t *ins,
                      const int64_t *in_offs, const int64_t *sizes,
                      int32_t rank, const int64_t *out_shape, int32_t dim,
                      int64_t out, int64_t out_off);
/* y = x[..., start:start+size, ...] along dim (any dtype); pad writes x */
/* into y with `low` elements of value before it along dim and `high` after. */
/* Each is the other's backward. */
int32_t fsdprt_slice(int64_t ctx, int64_t stream, int32_t dtype, int64_t x,
                     int64_t x_off, int32_t rank, const int64_t *shape,
                     int32_t dim, int64_t start, int64_t size, int64_t y,
                     int64_t y_off);
int32_t fsdprt_pad(int64_t ctx, int64_t stream, int32_t dtype, int64_t x,
                   int64_t x_off, int32_t rank, const int64_t *shape,
                   int32_t dim, int64_t low, int64_t high, double value,
                   int64_t y, int64_t y_off);
/* y = x[..., start:start+step*size:step, ...] along dim (size elements, */
/* any dtype); the backward writes dy's elements at those positions of  */
/* dx (x_shape) and zeros everywhere else.                              */
int32_t fsdprt_strided_slice(int64_t ctx, int64_t stream, int32_t dtype,
                             int64_t x, int64_t x_off, int32_t rank,
                             const int64_t *shape, int32_t dim, int64_t start,
                             int64_t step, int64_t size, int64_t y,
                             int64_t y_off);
int32_t fsdprt_strided_slice_backward(int64_t ctx, int64_t stream,
                                      int32_t dtype, int64_t dy, int64_t dy_off,
                                      int32_t rank, const int64_t *x_shape,
                                      int32_t dim, int64_t start, int64_t step,
                                      int64_t size, int64_t dx, int64_t dx_off);
/* y = torch.cumsum(x, dim) (any dtype; floats accumulate in double,     */
/* integers in int64); reverse sums from the end (cumsum's backward).    */
int32_t fsdprt_cumsum(int64_t ctx, int64_t stream, int32_t dtype, int64_t x,
                      int64_t x_off, int32_t rank, const int64_t *shape,
                      int32_t dim, int32_t reverse, int64_t y, int64_t y_off);
/* Mixture-of-experts routing, along the last dim of [rows, n] tensors.  */
/* topk: the k largest of each row (NaN largest, ties by position) and   */
/* their i64 positions. sort: stable ascending (any dtype; NaN last) and */
/* the i64 positions. histc: counts of x in `bins` equal bins over       */
/* [min, max] (outside: not counted) in x's dtype. invert_permutation:   */
/* y[p[i]] = i for p a permutation of [0, n) (i32 or i64).               */
int32_t fsdprt_topk_forward(int64_t ctx, int64_t stream, int32_t dtype,
                            int64_t x, int64_t x_off, int64_t rows, int64_t n,
                            int64_t k, int64_t values, int64_t values_off,
                            int64_t indices, int64_t indices_off);
int32_t fsdprt_sort_forward(int64_t ctx, int64_t stream, int32_t dtype,
                            int64_t x, int64_t x_off, int64_t rows, int64_t n,
                            int64_t values, int64_t values_off,
                            int64_t indices, int64_t indices_off);
int32_t fsdprt_histc(int64_t ctx, int64_t stream, int32_t dtype, int64_t x,
                     int64_t x_off, int64_t numel, int64_t bins, double min,
                     double max, int64_t y, int64_t y_off);
int32_t fsdprt_invert_permutation(int64_t ctx, int64_t stream, int32_t dtype,
                                  int64_t p, int64_t p_off, int64_t n,
                                  int64_t y, int64_t y_off);
/* Fails OUT_OF_RANGE, naming `what` and the first bad position, when one */
/* of the num_ids ids (I32 or I64) is outside [0, limit) and, with        */
/* has_ignore, not ignore_index (nn.id_range on ids computed in a step).  */
/* A device reports at the stream's next synchronisation, as embedding's  */
/* check does. `what` must outlive the context (a step's constant).      */
int32_t fsdprt_index_check(int64_t ctx, int64_t stream, int32_t ids_dtype,
                           int64_t ids, int64_t ids_off, int64_t num_ids,
                           int64_t limit, int32_t has_ignore,
                           int64_t ignore_index, const char *what);
/* Grouped GEMM: x[rows, k], w[groups, k, n], offsets[groups] (I32 or I64: */
/* each segment's end, non-decreasing, at most rows): y rows of segment g */
/* are x's times w[g]; rows past the last offset are 0. The backward     */
/* gives dw[g] = x[seg g]^T dy[seg g] (0 for an empty segment).           */
int32_t fsdprt_grouped_matmul_forward(int64_t ctx, int64_t stream,
                                      int32_t dtype, int32_t offsets_dtype,
                                      int64_t x, int64_t x_off, int64_t w,
                                      int64_t w_off, int64_t offsets,
                                      int64_t offsets_off, int64_t y,
                                      int64_t y_off, int64_t rows,
                                      int64_t groups, int64_t k, int64_t n);
int32_t fsdprt_grouped_matmul_backward_weight(
    int64_t ctx, int64_t stream, int32_t dtype, int32_t offsets_dtype,
    int64_t x, int64_t x_off, int64_t dy, int64_t dy_off, int64_t offsets,
    int64_t offsets_off, int64_t dw, int64_t dw_off, int64_t rows,
    int64_t groups, int64_t k, int64_t n);
/* Sum or mean over `dims` (keepdim changes only the shape, not the data). */
int32_t fsdprt_reduce_forward(int64_t ctx, int64_t stream, int32_t dtype,
                              int32_t kind, int64_t x, int64_t x_off,
                              int32_t rank, const int64_t *shape,
                              int32_t num_dims, const int64_t *dims, int64_t y,
                              int64_t y_off);
int32_t fsdprt_reduce_backward(int64_t ctx, int64_t stream, int32_t dtype,
                               int32_t kind, int64_t dy, int64_t dy_off,
                               int32_t rank, const int64_t *x_shape,
                               int32_t num_dims, const int64_t *dims,
                               int64_t dx, int64_t dx_off);

/* loss is a scalar of `dtype`. Backward takes dloss (a scalar); dlogits */
/* may be logits itself (the compiler overwrites logits nothing reads    */
/* afterwards). The logits are n rows of `width`, their first c columns  */
/* the classes: the rest pad the vocabulary to an aligned width (the     */
/* compiler's choice), take no part in the loss and get a zero gradient. */
int32_t fsdprt_cross_entropy_forward(int64_t ctx, int64_t stream, int32_t dtype,
                                     int32_t target_dtype, int64_t logits,
                                     int64_t logits_off, int64_t targets,
                                     int64_t targets_off, int64_t loss,
                                     int64_t loss_off, int64_t n, int64_t c,
                                     int64_t width, int32_t reduction,
                                     int64_t ignore_index);
int32_t fsdprt_cross_entropy_backward(
    int64_t ctx, int64_t stream, int32_t dtype, int32_t target_dtype,
    int64_t logits, int64_t logits_off, int64_t targets, int64_t targets_off,
    int64_t dloss, int64_t dloss_off, int64_t dlogits, int64_t dlogits_off,
    int64_t n, int64_t c, int64_t width, int32_t reduction,
    int64_t ignore_index);
/* Both in one pass over the logits: the loss of the forward and the       */
/* dlogits of the backward for `dloss`, the same bits as the two calls.    */
int32_t fsdprt_cross_entropy_forward_backward(
    int64_t ctx, int64_t stream, int32_t dtype, int32_t target_dtype,
    int64_t logits, int64_t logits_off, int64_t targets, int64_t targets_off,
    int64_t dloss, int64_t dloss_off, int64_t loss, int64_t loss_off,
    int64_t dlogits, int64_t dlogits_off, int64_t n, int64_t c,
    int64_t width, int32_t reduction, int64_t ignore_index);
int32_t fsdprt_mse_loss_forward(int64_t ctx, int64_t stream, int32_t dtype,
                                int64_t a, int64_t a_off, int64_t b,
                                int64_t b_off, int64_t loss, int64_t loss_off,
                                int64_t numel, int32_t reduction);

/* ---- Optimizers on a flat f32 shard -------------------------------------*/
/* grad_dtype is the gradient's storage type; param and state are f32. */
/* step is 1-based; step 1 initialises the momentum buffer / Adam moments. */
/* lr is scaled by the context's learning-rate factor when the call is made. */
int32_t fsdprt_sgd_step(int64_t ctx, int64_t stream, int32_t grad_dtype,
                        int64_t param, int64_t param_off, int64_t grad,
                        int64_t grad_off, int64_t momentum_buf, int64_t mb_off,
                        int64_t numel, int64_t step, double lr, double momentum,
                        double dampening, double weight_decay,
                        int32_t nesterov, int64_t skip, int64_t skip_off);
int32_t fsdprt_adamw_step(int64_t ctx, int64_t stream, int32_t grad_dtype,
                          int64_t param, int64_t param_off, int64_t grad,
                          int64_t grad_off, int64_t exp_avg, int64_t ea_off,
                          int64_t exp_avg_sq, int64_t eas_off, int64_t numel,
                          int64_t step, double lr, double beta1, double beta2,
                          double eps, double weight_decay, int32_t l2,
                          int64_t skip, int64_t skip_off);
/* Lion (Chen et al. 2023): c = beta1·m + (1-beta1)·g; p *= 1 - lr·wd;   */
/* p -= lr·sign(c); m = beta2·m + (1-beta2)·g. One state tensor, exp_avg. */
int32_t fsdprt_lion_step(int64_t ctx, int64_t stream, int32_t grad_dtype,
                         int64_t param, int64_t param_off, int64_t grad,
                         int64_t grad_off, int64_t exp_avg, int64_t ea_off,
                         int64_t numel, int64_t step, double lr, double beta1,
                         double beta2, double weight_decay, int64_t skip,
                         int64_t skip_off);
/* The same updates of `count` tensors with the same scalars in one call  */
/* (torch.optim's fused=True: one launch per 32 tensors on the GPU), the  */
/* same bits as a call each. Tensor k's operands are buffers[k·m + i] at  */
/* byte offset offsets[k·m + i], i in order param, grad, then the states  */
/* of the single call (m = 3 for sgd, its momentum_buf ignored without    */
/* momentum; 4 for adamw; 3 for lion); numels[k] elements. The tensors   */
/* must not overlap.                                                      */
int32_t fsdprt_sgd_multi_step(int64_t ctx, int64_t stream, int32_t grad_dtype,
                              int64_t count, const int64_t *buffers,
                              const int64_t *offsets, const int64_t *numels,
                              int64_t step, double lr, double momentum,
                              double dampening, double weight_decay,
                              int32_t nesterov, int64_t skip,
                              int64_t skip_off);
int32_t fsdprt_adamw_multi_step(int64_t ctx, int64_t stream,
                                int32_t grad_dtype, int64_t count,
                                const int64_t *buffers, const int64_t *offsets,
                                const int64_t *numels, int64_t step, double lr,
                                double beta1, double beta2, double eps,
                                double weight_decay, int32_t l2, int64_t skip,
                                int64_t skip_off);
int32_t fsdprt_lion_multi_step(int64_t ctx, int64_t stream, int32_t grad_dtype,
                               int64_t count, const int64_t *buffers,
                               const int64_t *offsets, const int64_t *numels,
                               int64_t step, double lr, double beta1,
                               double beta2, double weight_decay, int64_t skip,
                               int64_t skip_off);
/* torch.optim.Adafactor on `numel` elements of a flat parameter from its */
/* element flat_begin; layout: layout_count integers, 4 per parameter    */
/* (fsdp/rt/AdafactorLayout.h). stats: this rank's partial Σ param², Σ   */
/* grad²; factor: the (replicated) state from the summed stats and this  */
/* rank's partial Σ update² per parameter; apply: the update, with the   */
/* summed Σ update².                                                     */
int32_t fsdprt_adafactor_stats(int64_t ctx, int64_t stream, int32_t grad_dtype,
                               int64_t param, int64_t param_off, int64_t grad,
                               int64_t grad_off, int64_t numel,
                               int64_t flat_begin, int64_t layout_count,
                               const int64_t *layout, int64_t stats,
                               int64_t stats_off);
int32_t fsdprt_adafactor_factor(
    int64_t ctx, int64_t stream, int32_t grad_dtype, int64_t grad,
    int64_t grad_off, int64_t numel, int64_t flat_begin, int64_t layout_count,
    const int64_t *layout, int64_t state, int64_t state_off, int64_t stats,
    int64_t stats_off, int64_t update_sq, int64_t usq_off, int64_t step,
    double beta2_decay, double eps1, int64_t skip, int64_t skip_off);
int32_t fsdprt_adafactor_apply(
    int64_t ctx, int64_t stream, int32_t grad_dtype, int64_t param,
    int64_t param_off, int64_t grad, int64_t grad_off, int64_t numel,
    int64_t flat_begin, int64_t layout_count, const int64_t *layout,
    int64_t state, int64_t state_off, int64_t stats, int64_t stats_off,
    int64_t update_sq, int64_t usq_off, int64_t step, double lr, double eps1,
    double eps2, double d, double weight_decay, int64_t skip, int64_t skip_off);
/* fsdprt_adamw_step with l2 != 0 is torch.optim.Adam's update: weight_decay */
/* is added to the gradient (L2) instead of decaying the parameter.         */
/* The optimizer steps above do nothing when `skip` (one f32; buffer 0: */
/* absent) is non-zero when they run: a loss scaler's found-inf flag. */
/* out (one f32) = 1 if any grad element is inf or NaN, else [out or] 0. */
int32_t fsdprt_nonfinite_flag(int64_t ctx, int64_t stream, int32_t dtype,
                              int64_t grad, int64_t grad_off, int64_t numel,
                              int64_t out, int64_t out_off, int32_t accumulate);
/* out (one f32) = the context's loss scale, or its inverse when inverse != 0 */
/* (the scale as set when this call is issued). */
int32_t fsdprt_loss_scale(int64_t ctx, int64_t stream, int64_t out,
                          int64_t out_off, int32_t inverse);
/* out (one f32) = max(|grad|) (NaN if any element is NaN), or with      */
/* accumulate the max of that and out: clip_grad_norm_'s inf norm.       */
int32_t fsdprt_max_abs(int64_t ctx, int64_t stream, int32_t dtype,
                       int64_t grad, int64_t grad_off, int64_t numel,
                       int64_t out, int64_t out_off, int32_t accumulate);
/* The norm of type p (> 0, or inf) from `total`: sum |g|^p over every     */
/* gradient element, or max |g| for inf (all-reduced across ranks);        */
/* norm = total^(1/p) (total for inf), coef = min(1, max_norm /            */
/* (norm + 1e-6)): one f32 each, as torch.nn.utils.clip_grad_norm_.         */
int32_t fsdprt_clip_coefficient(int64_t ctx, int64_t stream, int64_t total,
                                int64_t total_off, int64_t norm,
                                int64_t norm_off, int64_t coef,
                                int64_t coef_off, double max_norm,
                                double norm_type);

/* ---- Library kernels -----------------------------------------------------*/
/* Tested on every backend and used by the runtime's benchmarks, but never  */
/* emitted by the compiler: it differentiates into forward kernels (the nn  */
/* ops' VJPs), dropout's backward is the forward with the same key, and    */
/* gradient clipping is nn ops, max_abs and clip_coefficient. scripts/completeness.py*/
/* checks each has a runtime test and that no other kernel is unreached.   */
/* The backward of fsdprt_matmul_forward. */
int32_t fsdprt_matmul_backward(int64_t ctx, int64_t stream, int32_t dtype,
                               int64_t a, int64_t a_off, int64_t b,
                               int64_t b_off, int64_t dc, int64_t dc_off,
                               int64_t da, int64_t da_off, int64_t db,
                               int64_t db_off, int64_t batch, int64_t m,
                               int64_t k, int64_t n, int32_t trans_a,
                               int32_t trans_b, int32_t b_batched);
/* The backward of fsdprt_binary_forward. */
int32_t fsdprt_binary_backward(int64_t ctx, int64_t stream, int32_t dtype,
                               int32_t op, int64_t a, int64_t a_off,
                               int32_t a_rank, const int64_t *a_shape,
                               int64_t b, int64_t b_off, int32_t b_rank,
                               const int64_t *b_shape, int64_t dout,
                               int64_t dout_off, int64_t da, int64_t da_off,
                               int64_t db, int64_t db_off);
/* The backward of fsdprt_scale_forward. */
int32_t fsdprt_scale_backward(int64_t ctx, int64_t stream, int32_t dtype,
                              int64_t dy, int64_t dy_off, int64_t dx,
                              int64_t dx_off, int64_t numel, double factor);
/* The backward of fsdprt_softmax_forward (reads its output y). */
int32_t fsdprt_softmax_backward(int64_t ctx, int64_t stream, int32_t dtype,
                                int64_t y, int64_t y_off, int64_t dy,
                                int64_t dy_off, int64_t dx, int64_t dx_off,
                                int32_t rank, const int64_t *shape,
                                int32_t dim);
/* The backward of fsdprt_dropout_forward (recomputes its mask). */
int32_t fsdprt_dropout_backward(int64_t ctx, int64_t stream, int32_t dtype,
                                int64_t dy, int64_t dy_off, int64_t dx,
                                int64_t dx_off, int64_t numel, double p,
                                int64_t seed, int64_t step, int64_t rng_id);
/* Uniform [a, b) or normal (mean a, std b) numbers from the same counter */
/* RNG, e.g. for parameter initialisation. */
int32_t fsdprt_rng_fill(int64_t ctx, int64_t stream, int32_t dtype,
                        int32_t distribution, int64_t dst, int64_t dst_off,
                        int64_t numel, double a, double b, int64_t seed,
                        int64_t step, int64_t rng_id);
/* The backward of fsdprt_transpose_forward. */
int32_t fsdprt_transpose_backward(int64_t ctx, int64_t stream, int32_t dtype,
                                  int64_t dy, int64_t dy_off, int64_t dx,
                                  int64_t dx_off, int32_t rank,
                                  const int64_t *x_shape, const int64_t *perm);
/* The backward of fsdprt_mse_loss_forward. */
int32_t fsdprt_mse_loss_backward(int64_t ctx, int64_t stream, int32_t dtype,
                                 int64_t a, int64_t a_off, int64_t b,
                                 int64_t b_off, int64_t dloss,
                                 int64_t dloss_off, int64_t da, int64_t da_off,
                                 int64_t db, int64_t db_off, int64_t numel,
                                 int32_t reduction);
/* out (one f32) = [out +] sum(grad^2), summed in double in a fixed order. */
int32_t fsdprt_grad_sq_norm(int64_t ctx, int64_t stream, int32_t dtype,
                            int64_t grad, int64_t grad_off, int64_t numel,
                            int64_t out, int64_t out_off, int32_t accumulate);
/* grad *= min(1, max_norm / (sqrt(total_sq) + 1e-6)); total_sq is one f32 */
/* in a buffer (the all-reduced sum of squares). */
int32_t fsdprt_clip_grad(int64_t ctx, int64_t stream, int32_t dtype,
                         int64_t grad, int64_t grad_off, int64_t numel,
                         int64_t total_sq, int64_t total_sq_off,
                         double max_norm);

/* ---- Checkpoints (safetensors) ------------------------------------------*/
int32_t fsdprt_ckpt_writer_create(const char *path, int64_t *out_writer);
/* Copies the bytes now; data is host memory of numel(shape) * dtype size. */
int32_t fsdprt_ckpt_writer_add(int64_t writer, const char *name, int32_t dtype,
                               int32_t rank, const int64_t *shape,
                               const void *data);
/* Synchronises the context, then copies the buffer bytes. */
int32_t fsdprt_ckpt_writer_add_buffer(int64_t writer, int64_t ctx,
                                      const char *name, int32_t dtype,
                                      int32_t rank, const int64_t *shape,
                                      int64_t buf, int64_t buf_off);
int32_t fsdprt_ckpt_writer_set_metadata(int64_t writer, const char *key,
                                        const char *value);
/* Writes atomically and destroys the writer (also on failure). */
int32_t fsdprt_ckpt_writer_finish(int64_t writer);
int32_t fsdprt_ckpt_writer_discard(int64_t writer);

int32_t fsdprt_ckpt_reader_open(const char *path, int64_t *out_reader);
int32_t fsdprt_ckpt_reader_close(int64_t reader);
int32_t fsdprt_ckpt_reader_num_tensors(int64_t reader, int64_t *out);
/* Name of the i-th tensor (sorted by name), copied into buf (NUL ended). */
int32_t fsdprt_ckpt_reader_tensor_name(int64_t reader, int64_t index, char *buf,
                                       int64_t buf_len);
/* shape must have room for FSDPRT_MAX_RANK entries. */
int32_t fsdprt_ckpt_reader_tensor_info(int64_t reader, const char *name,
                                       int32_t *out_dtype, int32_t *out_rank,
                                       int64_t *shape);
int32_t fsdprt_ckpt_reader_read(int64_t reader, const char *name, void *dst,
                                int64_t bytes);
/* Synchronises the context, then copies into the buffer. */
int32_t fsdprt_ckpt_reader_read_to_buffer(int64_t reader, const char *name,
                                          int64_t ctx, int64_t buf,
                                          int64_t buf_off);
int32_t fsdprt_ckpt_reader_metadata(int64_t reader, const char *key, char *buf,
                                    int64_t buf_len);

/* ---- Communicators (docs/Communicators.md) ------------------------------ */
/* Joins the job's rendezvous and creates the world communicator of backend */
/* "gloo" (CPU) or "nccl" (GPU), or "default": the one that reads the       */
/* context backend's memory (gloo for cpu, nccl for cuda, the tests' NCCL    */
/* emulation nccl_emu for cuda_emu), owned by ctx. _init_env reads the launcher's */
/* environment (torchrun RANK/WORLD_SIZE/..., mpirun OMPI_COMM_WORLD_*,      */
/* srun SLURM_*, MASTER_ADDR/MASTER_PORT); _init takes them explicitly       */
/* (job_id may be NULL: "fsdprt"). Timeouts <= 0 mean the environment's or   */
/* the defaults (collectives 300000 ms, rendezvous 60000 ms). The rank and   */
/* world size must match the context's.                                      */
int32_t fsdprt_comm_init_env(int64_t ctx, const char *backend,
                             int64_t *out_comm);
int32_t fsdprt_comm_init(int64_t ctx, const char *backend, int32_t rank,
                         int32_t world_size, const char *master_addr,
                         int32_t master_port, const char *job_id,
                         int64_t rendezvous_timeout_ms,
                         int64_t collective_timeout_ms, int64_t *out_comm);
/* Sub-groups of a [replicate, shard] mesh over comm (replicate * shard ==  */
/* its size; rank = r * shard + s): the shard group (contiguous ranks) and  */
/* the replicate group containing this rank. Collective over comm.          */
int32_t fsdprt_comm_split_mesh(int64_t ctx, int64_t comm, int32_t replicate,
                               int32_t shard, int64_t *out_shard_comm,
                               int64_t *out_replicate_comm);
int32_t fsdprt_comm_destroy(int64_t ctx, int64_t comm);
int32_t fsdprt_comm_rank(int64_t ctx, int64_t comm, int32_t *out);
int32_t fsdprt_comm_size(int64_t ctx, int64_t comm, int32_t *out);
int32_t fsdprt_comm_set_timeout(int64_t ctx, int64_t comm, int64_t timeout_ms);
/* torch.chunk's split of numel over size: chunk index starts at *out_begin */
/* and has *out_count elements (possibly 0).                               */
int32_t fsdprt_comm_shard_range(int64_t numel, int32_t size, int32_t index,
                                int64_t *out_begin, int64_t *out_count);

/* Collectives, enqueued on `stream` (ordered with events like any kernel); */
/* failures and timeouts are reported by the next stream synchronisation.   */
/* numel is the whole tensor; in (all_gather) / out (reduce_scatter) hold   */
/* this rank's chunk per fsdprt_comm_shard_range. Issue them in the same    */
/* order on every rank of the group.                                        */
int32_t fsdprt_all_gather(int64_t ctx, int64_t stream, int64_t comm,
                          int32_t dtype, int64_t in, int64_t in_off,
                          int64_t out, int64_t out_off, int64_t numel);
/* out = (sum(in / pre_divide) / post_divide), also / size for AVG. */
int32_t fsdprt_reduce_scatter(int64_t ctx, int64_t stream, int64_t comm,
                              int32_t dtype, int32_t op, int64_t in,
                              int64_t in_off, int64_t out, int64_t out_off,
                              int64_t numel, double pre_divide,
                              double post_divide);
int32_t fsdprt_all_reduce(int64_t ctx, int64_t stream, int64_t comm,
                          int32_t dtype, int32_t op, int64_t in, int64_t in_off,
                          int64_t out, int64_t out_off, int64_t numel);
/* Any dtype (integers too); root is a rank of the group. */
int32_t fsdprt_broadcast(int64_t ctx, int64_t stream, int64_t comm,
                         int32_t dtype, int64_t buf, int64_t off, int64_t numel,
                         int32_t root);
int32_t fsdprt_barrier(int64_t ctx, int64_t stream, int64_t comm);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FSDP_RT_FSDPRT_H */

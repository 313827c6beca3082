/*===- fsdp_session.h - One rank's training, driven in process ---*- C -*-===*
 *
 * The C API of libfsdp_session.so, which the Python package's Session
 * (python/fsdp_mlir/session.py) loads with ctypes: a compiled step library
 * opened with the runner's options, then a step per call on the caller's
 * batch, the same Trainer fsdprt-run drives (so a loop fed fsdprt-run's
 * batches trains bit for bit as it). One session is one rank: under
 * torchrun each process opens its own. Every function returns 0 on
 * success, else 1 with fsdp_session_last_error() (this thread's) saying
 * why. Strings and arrays returned stay valid until the session's next
 * call of the same function, or its close.
 *
 *===----------------------------------------------------------------------===*/
#ifndef FSDP_SESSION_H
#define FSDP_SESSION_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

const char *fsdp_session_last_error(void);

/* argv: a step library (.so) and fsdprt-run's options (--backend, --seed,
 * --load, --resume latest, --save, --save-format, --steps for the lr
 * schedule's length, --data for fsdp_session_batch, ...), and
 * --eval-program EVAL.so (mode=eval) for fsdp_session_evaluate. */
int32_t fsdp_session_open(int32_t argc, const char *const *argv,
                          int64_t *out_session);
int32_t fsdp_session_close(int64_t session);

/* The pre-launch report (collectives, memory plan). */
int32_t fsdp_session_report(int64_t session, const char **out_text);

/* The inputs of the training step (program 0) or of the eval program
 * (program 1), in the model's forward order: dtype ("f32", "i64", ...) and
 * this rank's shape (the leading dimension: its rows over every
 * micro-batch). */
int32_t fsdp_session_num_inputs(int64_t session, int32_t program,
                                int32_t *out_count);
int32_t fsdp_session_input(int64_t session, int32_t program, int32_t index,
                           const char **out_dtype, int32_t *out_rank,
                           const int64_t **out_shape);

/* One training step on this rank's inputs (one contiguous array per model
 * input, bytes[i] its size); its metrics as one JSON object (fsdprt-run's
 * --metrics line). */
int32_t fsdp_session_step(int64_t session, const void *const *inputs,
                          const int64_t *bytes, int32_t count,
                          const char **out_metrics_json);

/* The eval program's loss (the mean over the ranks) on this rank's inputs
 * (as fsdp_session_step's, for the eval program), of the weights now. */
int32_t fsdp_session_evaluate(int64_t session, const void *const *inputs,
                              const int64_t *bytes, int32_t count,
                              double *out_loss);

/* `num_samples` continuations of `prompt` (`prompt_len` ids) by
 * `new_tokens` tokens each, through the eval program with the weights now,
 * sampled as fsdprt-run --generate samples (temperature 0: greedy; top_k 0:
 * the whole vocabulary; `seed`); *out_tokens holds num_samples x new_tokens
 * ids, sample by sample. */
int32_t fsdp_session_generate(int64_t session, const int64_t *prompt,
                              int64_t prompt_len, int64_t new_tokens,
                              int64_t num_samples, double temperature,
                              int64_t top_k, uint64_t seed,
                              const int64_t **out_tokens);

/* fsdprt-run's batch of step `step` from --data (synthetic without it), in
 * the layout fsdp_session_step takes. */
int32_t fsdp_session_batch(int64_t session, int64_t step,
                           void *const *outputs, const int64_t *bytes,
                           int32_t count);

/* A checkpoint at the current step in --save's directory (every rank). */
int32_t fsdp_session_save(int64_t session);
/* Optimizer steps taken (a loaded checkpoint's included). */
int32_t fsdp_session_step_count(int64_t session, int64_t *out_steps);
/* The learning rate from the next step on; NaN: the schedule's again. */
int32_t fsdp_session_set_lr(int64_t session, double lr);

#ifdef __cplusplus
}
#endif

#endif /* FSDP_SESSION_H */

//===- Generate.h - Sampling text from an eval program ---------*- C++ -*-===//
//
// `fsdp-run EVAL --generate N`: a causal language model's eval program that
// returns "logits" [B, T, V] (the root forward names them) continues a
// prompt by N tokens. Each new token recomputes the forward over the last T
// tokens of the context (no KV cache: the program has fixed shapes), the
// window left-aligned in row s of micro-batch 0 and padded with id 0 after
// it, which a causal model never reads; the next token is drawn from the
// logits at the window's last position (Sampler.h). Sharded programs gather
// their units as in evaluation; every rank feeds the same rows, so every
// rank draws the same tokens and rank 0 prints them.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_DRIVER_GENERATE_H
#define FSDP_DRIVER_GENERATE_H

#include "runner/RunOptions.h"
#include "runner/StepProgram.h"
#include "fsdp/rt/Comm.h"

namespace fsdp {
namespace driver {

/// Throws std::runtime_error for a program that cannot generate (not eval,
/// no logits, inputs that are not token ids), too many samples, or a prompt
/// outside the vocabulary.
void generate(const RunOptions &o, StepProgram &program,
              const rt::LaunchInfo &launch);

} // namespace driver
} // namespace fsdp

#endif // FSDP_DRIVER_GENERATE_H

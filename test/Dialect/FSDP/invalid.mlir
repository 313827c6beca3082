// Every fsdp verifier and parser error, once.
// RUN: fsdp-opt %s -split-input-file -verify-diagnostics

// expected-error @+1 {{'fsdp.model' op must hold exactly one fsdp.module, the root}}
fsdp.model @empty {
}

// -----

// expected-error @+1 {{'fsdp.model' op must hold exactly one fsdp.module, the root}}
fsdp.model @two_roots {
  fsdp.module @a kind "A" {
    fsdp.forward () -> tensor<f32> {
      %l = arith.constant dense<0.0> : tensor<f32>
      fsdp.return %l : tensor<f32>
    }
  }
  fsdp.module @b kind "B" {
  }
}

// -----

// expected-error @+1 {{'fsdp.model' op root module 'root' needs a forward returning the loss}}
fsdp.model @no_forward {
  fsdp.module @root kind "Net" {
  }
}

// -----

fsdp.model @no_loss {
  fsdp.module @root kind "Net" {
    // expected-error @+1 {{'fsdp.forward' op of the root module must return the loss (a 0-d float tensor) first}}
    fsdp.forward (%x: tensor<4xf32>) -> tensor<4xf32> {
      fsdp.return %x : tensor<4xf32>
    }
  }
}

// -----

fsdp.model @names_count {
  fsdp.module @root kind "Net" {
    fsdp.forward (%x: tensor<4xf32>) -> (tensor<f32>, tensor<4xf32>) {
      %l = nn.reduce_sum %x {dims = array<i64: 0>} : (tensor<4xf32>) -> tensor<f32>
      // expected-error @+1 {{'fsdp.return' op names 1 output(s) but returns 2}}
      fsdp.return {names = ["loss"]} %l, %x : tensor<f32>, tensor<4xf32>
    }
  }
}

// -----

fsdp.model @names_twice {
  fsdp.module @root kind "Net" {
    fsdp.forward (%x: tensor<4xf32>) -> (tensor<f32>, tensor<4xf32>) {
      %l = nn.reduce_sum %x {dims = array<i64: 0>} : (tensor<4xf32>) -> tensor<f32>
      // expected-error @+1 {{output names must be non-empty and distinct, got 'y' twice or empty}}
      fsdp.return {names = ["y", "y"]} %l, %x : tensor<f32>, tensor<4xf32>
    }
  }
}

// -----

fsdp.model @names_in_child {
  fsdp.module @root kind "Net" {
    fsdp.module @child kind "Id" {
      fsdp.forward (%x: tensor<4xf32>) -> tensor<4xf32> {
        // expected-error @+1 {{'fsdp.return' op names outputs only in the root module's forward}}
        fsdp.return {names = ["y"]} %x : tensor<4xf32>
      }
    }
    fsdp.forward (%x: tensor<4xf32>) -> tensor<f32> {
      %y = fsdp.call @child(%x) : (tensor<4xf32>) -> tensor<4xf32>
      %l = nn.reduce_sum %y {dims = array<i64: 0>} : (tensor<4xf32>) -> tensor<f32>
      fsdp.return %l : tensor<f32>
    }
  }
}

// -----

// expected-error @+1 {{expects parent op to be one of 'fsdp.model, fsdp.module'}}
fsdp.module @orphan kind "Linear" {
}

// -----

fsdp.model @duplicate {
  fsdp.module @root kind "Net" {
    // expected-note @+1 {{see existing symbol definition here}}
    fsdp.param @weight : tensor<4xf32> init <zeros>
    // expected-error @+1 {{redefinition of symbol named 'weight'}}
    fsdp.param @weight : tensor<4xf32> init <ones>
    fsdp.forward () -> tensor<f32> {
      %l = arith.constant dense<0.0> : tensor<f32>
      fsdp.return %l : tensor<f32>
    }
  }
}

// -----

fsdp.model @stray_op {
  fsdp.module @root kind "Net" {
    // expected-error @+1 {{'arith.constant' op is not allowed in the body of an fsdp.module}}
    %c = arith.constant dense<0.0> : tensor<f32>
    fsdp.forward () -> tensor<f32> {
      %l = arith.constant dense<0.0> : tensor<f32>
      fsdp.return %l : tensor<f32>
    }
  }
}

// -----

fsdp.model @two_forwards {
  fsdp.module @root kind "Net" {
    fsdp.forward () -> tensor<f32> {
      %l = arith.constant dense<0.0> : tensor<f32>
      fsdp.return %l : tensor<f32>
    }
    // expected-error @+1 {{'fsdp.forward' op is a second forward of the root module 'root' (the root has one forward, the train step's)}}
    fsdp.forward (%x: tensor<4xf32>) -> tensor<f32> {
      %l = arith.constant dense<0.0> : tensor<f32>
      fsdp.return %l : tensor<f32>
    }
  }
}

// -----

// A call picks a module's forward by its operand types: two forwards may
// not take the same ones.
fsdp.model @same_signature {
  fsdp.module @root kind "Net" {
    fsdp.module @a kind "A" {
      // expected-note @+1 {{the earlier forward}}
      fsdp.forward (%x: tensor<4xf32>) -> tensor<4xf32> {
        fsdp.return %x : tensor<4xf32>
      }
      // expected-error @+1 {{'fsdp.forward' op takes the input types of an earlier forward of module 'a' (a call picks its forward by its operand types)}}
      fsdp.forward (%x: tensor<4xf32>) -> tensor<f32> {
        %l = arith.constant dense<0.0> : tensor<f32>
        fsdp.return %l : tensor<f32>
      }
    }
    fsdp.forward () -> tensor<f32> {
      %l = arith.constant dense<0.0> : tensor<f32>
      fsdp.return %l : tensor<f32>
    }
  }
}

// -----

fsdp.model @no_forward_takes {
  fsdp.module @root kind "Net" {
    fsdp.module @a kind "A" {
      fsdp.forward (%x: tensor<4xf32>) -> tensor<4xf32> {
        fsdp.return %x : tensor<4xf32>
      }
      fsdp.forward (%x: tensor<8xf32>) -> tensor<8xf32> {
        fsdp.return %x : tensor<8xf32>
      }
    }
    fsdp.forward (%x: tensor<6xf32>) -> tensor<f32> {
      // expected-error @+1 {{'fsdp.call' op passes operand types ('tensor<6xf32>') that none of the 2 forwards of 'a' takes}}
      %y = fsdp.call @a(%x) : (tensor<6xf32>) -> tensor<6xf32>
      %l = arith.constant dense<0.0> : tensor<f32>
      fsdp.return %l : tensor<f32>
    }
  }
}

// -----

fsdp.model @result_of_the_picked_forward {
  fsdp.module @root kind "Net" {
    fsdp.module @a kind "A" {
      fsdp.forward (%x: tensor<4xf32>) -> tensor<4xf32> {
        fsdp.return %x : tensor<4xf32>
      }
      fsdp.forward (%x: tensor<8xf32>) -> tensor<8xf32> {
        fsdp.return %x : tensor<8xf32>
      }
    }
    fsdp.forward (%x: tensor<8xf32>) -> tensor<f32> {
      // expected-error @+1 {{'fsdp.call' op result #0 has type 'tensor<4xf32>' but the forward of 'a' expects 'tensor<8xf32>'}}
      %y = fsdp.call @a(%x) : (tensor<8xf32>) -> tensor<4xf32>
      %l = arith.constant dense<0.0> : tensor<f32>
      fsdp.return %l : tensor<f32>
    }
  }
}

// -----

fsdp.model @m {
  fsdp.module @root kind "Net" {
    // expected-error @+1 {{initializer 'kaiming_uniform' needs fan-in/fan-out, which a tensor of rank 1 does not have (rank >= 2 required)}}
    fsdp.param @bias : tensor<4xf32> init <kaiming_uniform(2.23606797749979)>
  }
}

// -----

fsdp.model @m {
  fsdp.module @root kind "Net" {
    // expected-error @+1 {{integer tensor cannot use random initializer 'normal'}}
    fsdp.buffer @ids : tensor<4xi64> init <normal(0.0, 1.0)>
  }
}

// -----

fsdp.model @m {
  fsdp.module @root kind "Net" {
    // expected-error @+1 {{attribute 'type' failed to satisfy constraint: type attribute of statically shaped tensor of 32-bit float or bfloat16 type or 16-bit float values}}
    fsdp.param @ids : tensor<4xi64> init <zeros>
  }
}

// -----

// expected-error @+1 {{unknown initializer 'gaussian'}}
fsdp.param @w : tensor<4xf32> init <gaussian(0.0, 1.0)>

// -----

// expected-error @+1 {{initializer 'normal' takes 2 argument(s), got 1}}
fsdp.param @w : tensor<4xf32> init <normal(0.0)>

// -----

// expected-error @+1 {{initializer 'normal' needs a positive std, got 0}}
fsdp.param @w : tensor<4xf32> init <normal(0.0, 0.0)>

// -----

// expected-error @+1 {{initializer 'uniform' needs a < b, got [1.000000e+00, -1.000000e+00]}}
fsdp.param @w : tensor<4xf32> init <uniform(1.0, -1.0)>

// -----

// expected-error @+1 {{initializer 'trunc_normal' needs a < b, got [2.000000e+00, -2.000000e+00]}}
fsdp.param @w : tensor<4xf32> init <trunc_normal(0.0, 1.0, 2.0, -2.0)>

// -----

// expected-error @+1 {{initializer 'xavier_uniform' needs a positive gain, got -1}}
fsdp.param @w : tensor<4x4xf32> init <xavier_uniform(-1.0)>

// -----

// expected-error @+1 {{expected true, false or an integer, got 'maybe'}}
fsdp.module @m kind "Linear" unit<reshard_after_forward = maybe> {
}

// -----

// expected-error @+1 {{reshard_after_forward = 0: the ranks to reshard to after the forward must be >= 1}}
fsdp.module @m kind "Linear" unit<reshard_after_forward = 0> {
}

// -----

// expected-error @+1 {{expected reshard_after_forward, rank_local, param_dtype, reduce_dtype, output_dtype, cast_forward_inputs, ignored, activation_checkpointing, forward_prefetch or backward_prefetch, got 'process_group'}}
fsdp.module @m kind "Linear" unit<process_group = true> {
}

// -----

// expected-error @+1 {{expected activation_checkpointing = true, false or selective, got 'ops'}}
fsdp.module @m kind "Linear" unit<activation_checkpointing = ops> {
}

// -----

// expected-error @+1 {{unit param_dtype must be f32, bf16 or f16, got 'i32'}}
fsdp.module @m kind "Linear" unit<param_dtype = i32> {
}

// -----

// expected-error @+1 {{unit output_dtype must be f32, bf16 or f16, got 'f64'}}
fsdp.module @m kind "Linear" unit<reduce_dtype = f32, output_dtype = f64> {
}

// -----

// expected-error @+1 {{expected true or false, got 'bf16'}}
fsdp.module @m kind "Linear" unit<cast_forward_inputs = bf16> {
}

// -----

// expected-error @+1 {{an ignored unit (ignored = local) takes no other setting}}
fsdp.module @m kind "Linear" unit<ignored = local, param_dtype = bf16> {
}

// -----

// An ignored unit is never gathered: nothing to prefetch from it.
// expected-error @+1 {{an ignored unit (ignored = all_reduce) takes no other setting}}
fsdp.module @m kind "Linear" unit<ignored = all_reduce, forward_prefetch = ["h.1"]> {
}

// -----

// expected-error @+1 {{forward_prefetch must list unit names (non-empty strings), got [""]}}
fsdp.module @m kind "Linear" unit<forward_prefetch = [""]> {
}

// -----

// expected-error @+1 {{expected true or false, got 'yes'}}
fsdp.module @m kind "Linear" unit<reshard_after_forward = false, rank_local = yes> {
}

// -----

func.func @bad_mesh(%x: tensor<4xf32>) {
  // expected-error @+1 {{mesh shard size must be >= 1, got 0}}
  %0 = fsdp.all_reduce %x mesh<shard = 0> group world dtype f32 sum : tensor<4xf32>
  return
}

// -----

func.func @bad_mesh_replicate(%x: tensor<4xf32>) {
  // expected-error @+1 {{mesh replicate size must be >= 1, got 0}}
  %0 = fsdp.all_reduce %x mesh<replicate = 0, shard = 2> group world dtype f32 sum : tensor<4xf32>
  return
}

// -----

fsdp.model @m {
  fsdp.module @root kind "Net" {
    fsdp.forward (%x: tensor<4xf32>) -> tensor<f32> {
      // expected-error @+1 {{'fsdp.return' op returns 2 value(s) but the forward declares 1}}
      fsdp.return %x, %x : tensor<4xf32>, tensor<4xf32>
    }
  }
}

// -----

fsdp.model @m {
  fsdp.module @root kind "Net" {
    fsdp.forward (%x: tensor<4xf32>) -> tensor<f32> {
      // expected-error @+1 {{'fsdp.return' op result #0 has type 'tensor<4xf32>' but the forward declares 'tensor<f32>'}}
      fsdp.return %x : tensor<4xf32>
    }
  }
}

// -----

fsdp.model @m {
  fsdp.module @root kind "Net" {
    // expected-error @+1 {{'fsdp.forward' op block arguments do not match the signature}}
    "fsdp.forward"() <{function_type = (tensor<4xf32>) -> tensor<f32>}> ({
    ^bb0(%x: tensor<8xf32>):
      %l = arith.constant dense<0.0> : tensor<f32>
      fsdp.return %l : tensor<f32>
    }) : () -> ()
  }
}

// -----

fsdp.model @m {
  fsdp.module @root kind "Net" {
    fsdp.forward (%x: tensor<4xf32>) -> tensor<f32> {
      // expected-error @+1 {{'fsdp.call' op unknown module @missing in module '(root)'}}
      %y = fsdp.call @missing(%x) : (tensor<4xf32>) -> tensor<f32>
      fsdp.return %y : tensor<f32>
    }
  }
}

// -----

fsdp.model @m {
  fsdp.module @root kind "Net" {
    fsdp.module @a kind "A" {
      fsdp.forward (%x: tensor<4xf32>) -> tensor<4xf32> {
        // expected-error @+1 {{'fsdp.call' op module @b is outside the subtree of module 'a' (found from '(root)'); read it in a common ancestor and pass it as an argument}}
        %y = fsdp.call @b(%x) : (tensor<4xf32>) -> tensor<4xf32>
        fsdp.return %y : tensor<4xf32>
      }
    }
    fsdp.module @b kind "B" {
      fsdp.forward (%x: tensor<4xf32>) -> tensor<4xf32> {
        fsdp.return %x : tensor<4xf32>
      }
    }
    fsdp.forward (%x: tensor<4xf32>) -> tensor<f32> {
      %l = arith.constant dense<0.0> : tensor<f32>
      fsdp.return %l : tensor<f32>
    }
  }
}

// -----

fsdp.model @m {
  fsdp.module @root kind "Net" {
    fsdp.param @w : tensor<4xf32> init <zeros>
    fsdp.forward (%x: tensor<4xf32>) -> tensor<f32> {
      // expected-error @+1 {{'fsdp.call' op callee @w is a 'fsdp.param', not an fsdp.module}}
      %y = fsdp.call @w(%x) : (tensor<4xf32>) -> tensor<f32>
      fsdp.return %y : tensor<f32>
    }
  }
}

// -----

fsdp.model @m {
  fsdp.module @root kind "Net" {
    fsdp.module @layers kind "ModuleList" {
    }
    fsdp.forward (%x: tensor<4xf32>) -> tensor<f32> {
      // expected-error @+1 {{'fsdp.call' op module 'layers' of kind 'ModuleList' has no forward and cannot be called}}
      %y = fsdp.call @layers(%x) : (tensor<4xf32>) -> tensor<f32>
      fsdp.return %y : tensor<f32>
    }
  }
}

// -----

fsdp.model @m {
  fsdp.module @root kind "Net" {
    fsdp.module @a kind "A" {
      fsdp.forward (%x: tensor<4xf32>) -> tensor<4xf32> {
        fsdp.return %x : tensor<4xf32>
      }
    }
    fsdp.forward (%x: tensor<4xf32>) -> tensor<f32> {
      // expected-error @+1 {{'fsdp.call' op passes 2 operand(s) but the forward of 'a' has 1}}
      %y = fsdp.call @a(%x, %x) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      %l = arith.constant dense<0.0> : tensor<f32>
      fsdp.return %l : tensor<f32>
    }
  }
}

// -----

fsdp.model @m {
  fsdp.module @root kind "Net" {
    fsdp.module @a kind "A" {
      fsdp.forward (%x: tensor<4xf32>) -> tensor<4xf32> {
        fsdp.return %x : tensor<4xf32>
      }
    }
    fsdp.forward (%x: tensor<4xbf16>) -> tensor<f32> {
      // expected-error @+1 {{'fsdp.call' op operand #0 has type 'tensor<4xbf16>' but the forward of 'a' expects 'tensor<4xf32>'}}
      %y = fsdp.call @a(%x) : (tensor<4xbf16>) -> tensor<4xf32>
      %l = arith.constant dense<0.0> : tensor<f32>
      fsdp.return %l : tensor<f32>
    }
  }
}

// -----

fsdp.model @m {
  fsdp.module @root kind "Net" {
    fsdp.module @a kind "A" {
      fsdp.forward (%x: tensor<4xf32>) -> tensor<4xf32> {
        fsdp.return %x : tensor<4xf32>
      }
    }
    fsdp.forward (%x: tensor<4xf32>) -> tensor<f32> {
      // expected-error @+1 {{'fsdp.call' op result #0 has type 'tensor<8xf32>' but the forward of 'a' expects 'tensor<4xf32>'}}
      %y = fsdp.call @a(%x) : (tensor<4xf32>) -> tensor<8xf32>
      %l = arith.constant dense<0.0> : tensor<f32>
      fsdp.return %l : tensor<f32>
    }
  }
}

// -----

func.func @call_outside(%x: tensor<4xf32>) {
  // expected-error @+1 {{'fsdp.call' op must be inside the forward of an fsdp.module}}
  %y = fsdp.call @a(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

fsdp.model @m {
  fsdp.module @root kind "Net" {
    fsdp.forward (%x: tensor<4xf32>) -> tensor<f32> {
      // expected-error @+1 {{'fsdp.get_param' op unknown parameter @weight in module '(root)'}}
      %w = fsdp.get_param @weight : tensor<4xf32>
      %l = arith.constant dense<0.0> : tensor<f32>
      fsdp.return %l : tensor<f32>
    }
  }
}

// -----

// Tied weights: the head reads the embedding's weight from outside its subtree.
fsdp.model @m {
  fsdp.module @root kind "GPT" {
    fsdp.module @wte kind "Embedding" {
      fsdp.param @weight : tensor<8x4xf32> init <normal(0.0, 0.02)>
    }
    fsdp.module @lm_head kind "Linear" {
      fsdp.forward (%x: tensor<2x4xf32>) -> tensor<2x8xf32> {
        // expected-error @+1 {{'fsdp.get_param' op parameter @wte::@weight is outside the subtree of module 'lm_head' (found from '(root)'); read it in a common ancestor and pass it as an argument}}
        %w = fsdp.get_param @wte::@weight : tensor<8x4xf32>
        %y = nn.linear %x, %w : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<2x8xf32>
        fsdp.return %y : tensor<2x8xf32>
      }
    }
    fsdp.forward (%x: tensor<4xf32>) -> tensor<f32> {
      %l = arith.constant dense<0.0> : tensor<f32>
      fsdp.return %l : tensor<f32>
    }
  }
}

// -----

fsdp.model @m {
  fsdp.module @root kind "Net" {
    fsdp.buffer @stats : tensor<4xf32> init <zeros>
    fsdp.forward (%x: tensor<4xf32>) -> tensor<f32> {
      // expected-error @+1 {{'fsdp.get_param' op @stats is a 'fsdp.buffer', not a parameter (buffers are read with fsdp.get_buffer)}}
      %w = fsdp.get_param @stats : tensor<4xf32>
      %l = arith.constant dense<0.0> : tensor<f32>
      fsdp.return %l : tensor<f32>
    }
  }
}

// -----

fsdp.model @m {
  fsdp.module @root kind "Net" {
    fsdp.param @w : tensor<4xf32> init <zeros>
    fsdp.forward (%x: tensor<4xf32>) -> tensor<f32> {
      // expected-error @+1 {{'fsdp.get_param' op parameter @w has type 'tensor<4xf32>', not 'tensor<4xbf16>'}}
      %w = fsdp.get_param @w : tensor<4xbf16>
      %l = arith.constant dense<0.0> : tensor<f32>
      fsdp.return %l : tensor<f32>
    }
  }
}

// -----

fsdp.model @m {
  fsdp.module @root kind "Net" {
    fsdp.param @w : tensor<4xf32> init <zeros>
    fsdp.forward (%x: tensor<4xf32>) -> tensor<f32> {
      // expected-error @+1 {{'fsdp.get_buffer' op @w is a 'fsdp.param', not a buffer (parameters are read with fsdp.get_param)}}
      %w = fsdp.get_buffer @w : tensor<4xf32>
      %l = arith.constant dense<0.0> : tensor<f32>
      fsdp.return %l : tensor<f32>
    }
  }
}

// -----

fsdp.model @m {
  fsdp.module @root kind "Net" {
    fsdp.buffer @b : tensor<4xf32> init <zeros>
    fsdp.forward (%x: tensor<8xf32>) -> tensor<f32> {
      // expected-error @+1 {{'fsdp.set_buffer' op buffer @b has type 'tensor<4xf32>', not 'tensor<8xf32>'}}
      fsdp.set_buffer @b, %x : tensor<8xf32>
      %l = arith.constant dense<0.0> : tensor<f32>
      fsdp.return %l : tensor<f32>
    }
  }
}

// -----

func.func @group_on_1d_mesh(%x: tensor<4xf32>) {
  // expected-error @+1 {{group 'replicate' does not exist on the 1-D mesh #fsdp.mesh<shard = 4>; use a 2-D mesh <replicate = R, shard = S>}}
  %0 = fsdp.all_reduce %x mesh<shard = 4> group replicate dtype f32 sum : tensor<4xf32>
  return
}

// -----

func.func @operand_dtype(%x: tensor<4xf32>) {
  // expected-error @+1 {{operand element type 'f32' differs from the declared dtype 'bf16'}}
  %0 = fsdp.all_gather %x mesh<shard = 4> group shard dtype bf16 : tensor<4xf32> -> tensor<16xbf16>
  return
}

// -----

func.func @result_dtype(%x: tensor<4xbf16>) {
  // expected-error @+1 {{result element type 'f32' differs from the declared dtype 'bf16'}}
  %0 = fsdp.all_gather %x mesh<shard = 4> group shard dtype bf16 : tensor<4xbf16> -> tensor<16xf32>
  return
}

// -----

func.func @rank(%x: tensor<4xf32>) {
  // expected-error @+1 {{operand and result must have the same rank >= 1}}
  %0 = fsdp.all_gather %x mesh<shard = 4> group shard dtype f32 : tensor<4xf32> -> tensor<16x1xf32>
  return
}

// -----

func.func @trailing_dims(%x: tensor<4x3xf32>) {
  // expected-error @+1 {{operand and result may differ only in dim 0}}
  %0 = fsdp.all_gather %x mesh<shard = 4> group shard dtype f32 : tensor<4x3xf32> -> tensor<16x4xf32>
  return
}

// -----

func.func @all_gather_dim0(%x: tensor<4xf32>) {
  // expected-error @+1 {{result dim 0 must be 4 x 8 ranks = 32, got 16}}
  %0 = fsdp.all_gather %x mesh<replicate = 2, shard = 4> group world dtype f32 : tensor<4xf32> -> tensor<16xf32>
  return
}

// -----

func.func @reduce_scatter_dim0(%x: tensor<10xf32>) {
  // expected-error @+1 {{operand dim 0 (10) must be result dim 0 (3) x 4 ranks}}
  %0 = fsdp.reduce_scatter %x mesh<shard = 4> group shard dtype f32 avg : tensor<10xf32> -> tensor<3xf32>
  return
}

// -----

func.func @divide_factor(%x: tensor<8xf32>) {
  // expected-error @+1 {{divide factors must be positive, got pre 0.000000e+00, post 1.000000e+00}}
  %0 = fsdp.reduce_scatter %x mesh<shard = 4> group shard dtype f32 sum {pre_divide = 0.0 : f64} : tensor<8xf32> -> tensor<2xf32>
  return
}

// -----

func.func @all_reduce_divide(%x: tensor<8xf32>) {
  // expected-error @+1 {{divide factors must be positive, got pre 1.000000e+00, post -2.000000e+00}}
  %0 = fsdp.all_reduce %x mesh<shard = 4> group shard dtype f32 sum {post_divide = -2.0 : f64} : tensor<8xf32>
  return
}

// -----

func.func @broadcast_root(%x: tensor<8xf32>) {
  // expected-error @+1 {{root 4 is not a rank of the 4-rank group}}
  %0 = fsdp.broadcast %x mesh<replicate = 2, shard = 4> group shard dtype f32 root 4 : tensor<8xf32>
  return
}

// -----

func.func @unshard_size(%x: tensor<8xf32>) {
  // expected-error @+1 {{result dim 0 must be 8 x 2 ranks = 16, got 17}}
  %0 = fsdp.unshard %x unit "a" mesh<shard = 2> : tensor<8xf32> -> !fsdp.token<tensor<17xf32>>
  return
}

// -----

func.func @unshard_dtype(%x: tensor<8xbf16>) {
  // expected-error @+1 {{result element type 'f32' differs from the declared dtype 'bf16'}}
  %0 = fsdp.unshard %x unit "a" mesh<shard = 2> : tensor<8xbf16> -> !fsdp.token<tensor<16xf32>>
  return
}

// -----

func.func @unshard_flat(%x: tensor<8x2xf32>) {
  // expected-error @+1 {{operand #0 must be 1D tensor of 32-bit float or bfloat16 type or 16-bit float values}}
  %0 = fsdp.unshard %x unit "a" mesh<shard = 2> : tensor<8x2xf32> -> !fsdp.token<tensor<16x2xf32>>
  return
}

// -----

func.func @wait_type(%t: !fsdp.token<tensor<16xf32>>) {
  // expected-error @+1 {{failed to verify that result is the token's tensor}}
  %0 = "fsdp.wait"(%t) : (!fsdp.token<tensor<16xf32>>) -> tensor<8xf32>
  return
}

// -----

func.func @reduce_grads_size(%g: tensor<16xf32>) {
  // expected-error @+1 {{operand dim 0 (16) must be result dim 0 (4) x 2 ranks}}
  %0 = fsdp.reduce_grads %g unit "a" mesh<replicate = 2, shard = 2> avg : tensor<16xf32> -> tensor<4xf32>
  return
}

// -----

func.func @view_past_end(%full: tensor<10xf32>) {
  // expected-error @+1 {{view [8, 12) is past the end of the 10-element flat parameter}}
  %0 = fsdp.view %full[8] : tensor<10xf32> -> tensor<4xf32>
  return
}

// -----

func.func @view_dtype(%full: tensor<10xf32>) {
  // expected-error @+1 {{view element type 'bf16' differs from the flat parameter's 'f32'}}
  %0 = fsdp.view %full[0] : tensor<10xf32> -> tensor<4xbf16>
  return
}

// -----

func.func @flatten_overflow(%a: tensor<4x4xf32>) {
  // expected-error @+1 {{inputs hold 16 elements, more than the 12-element result}}
  %0 = fsdp.flatten %a : (tensor<4x4xf32>) -> tensor<12xf32>
  return
}

// -----

func.func @flatten_dtype(%a: tensor<4xbf16>) {
  // expected-error @+1 {{input element type 'bf16' differs from the result's 'f32'}}
  %0 = fsdp.flatten %a : (tensor<4xbf16>) -> tensor<4xf32>
  return
}

// -----

func.func @sgd_buffer(%p: tensor<4xf32>, %s: tensor<i64>) {
  // expected-error @+1 {{takes and returns a momentum buffer exactly when momentum is non-zero}}
  %0 = fsdp.sgd_step %p, %p step %s {lr = 0.1 : f64, momentum = 0.9 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<i64>) -> tensor<4xf32>
  return
}

// -----

func.func @segments_apart(%p: tensor<4xf32>, %s: tensor<i64>) {
  // expected-error @+1 {{segment_starts, segment_lr_scales and segment_weight_decays go together, one value per segment}}
  %0 = fsdp.sgd_step %p, %p step %s {lr = 0.1 : f64, segment_starts = array<i64: 0, 2>, segment_lr_scales = array<f64: 1.0>, segment_weight_decays = array<f64: 0.0, 0.0>} : (tensor<4xf32>, tensor<4xf32>, tensor<i64>) -> tensor<4xf32>
  return
}

// -----

func.func @segments_not_from_zero(%p: tensor<4xf32>, %s: tensor<i64>) {
  // expected-error @+1 {{segment_starts must increase from 0}}
  %0 = fsdp.sgd_step %p, %p step %s {lr = 0.1 : f64, segment_starts = array<i64: 0, 2, 2>, segment_lr_scales = array<f64: 1.0, 1.0, 1.0>, segment_weight_decays = array<f64: 0.0, 0.0, 0.0>} : (tensor<4xf32>, tensor<4xf32>, tensor<i64>) -> tensor<4xf32>
  return
}

// -----

func.func @segments_first_differs(%p: tensor<4xf32>, %m: tensor<4xf32>, %s: tensor<i64>) {
  // expected-error @+1 {{lr_scale and weight_decay must be the first segment's}}
  %0:3 = fsdp.adamw_step %p, %p, %m, %m step %s {lr = 0.1 : f64, segment_starts = array<i64: 0, 2>, segment_lr_scales = array<f64: 1.0, 0.5>, segment_weight_decays = array<f64: 0.0, 0.01>} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<i64>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @negative_lr_scale(%p: tensor<4xf32>, %s: tensor<i64>) {
  // expected-error @+1 {{lr_scale must be >= 0}}
  %0 = fsdp.sgd_step %p, %p step %s {lr = 0.1 : f64, lr_scale = -1.0 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<i64>) -> tensor<4xf32>
  return
}

// -----

func.func @sgd_nesterov(%p: tensor<4xf32>, %s: tensor<i64>) {
  // expected-error @+1 {{nesterov momentum requires a momentum and zero dampening}}
  %0 = fsdp.sgd_step %p, %p step %s {lr = 0.1 : f64, nesterov} : (tensor<4xf32>, tensor<4xf32>, tensor<i64>) -> tensor<4xf32>
  return
}

// -----

func.func @sgd_lr(%p: tensor<4xf32>, %s: tensor<i64>) {
  // expected-error @+1 {{learning rate must be >= 0}}
  %0 = fsdp.sgd_step %p, %p step %s {lr = -0.1 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<i64>) -> tensor<4xf32>
  return
}

// -----

func.func @grad_shape(%p: tensor<4xf32>, %g: tensor<5xf32>, %s: tensor<i64>) {
  // expected-error @+1 {{gradient has type 'tensor<5xf32>', not the shape of the parameter's 'tensor<4xf32>'}}
  %0 = fsdp.sgd_step %p, %g step %s {lr = 0.1 : f64} : (tensor<4xf32>, tensor<5xf32>, tensor<i64>) -> tensor<4xf32>
  return
}

// -----

func.func @state_type(%p: tensor<4xf32>, %m: tensor<4xbf16>, %s: tensor<i64>) {
  // expected-error @+1 {{an operand or result has type 'tensor<4xbf16>', not the parameter's 'tensor<4xf32>'}}
  %0:3 = fsdp.adamw_step %p, %p, %m, %m step %s {lr = 0.1 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xbf16>, tensor<4xbf16>, tensor<i64>) -> (tensor<4xf32>, tensor<4xbf16>, tensor<4xbf16>)
  return
}

// -----

func.func @adamw_betas(%p: tensor<4xf32>, %s: tensor<i64>) {
  // expected-error @+1 {{betas must be in [0, 1), got (9.000000e-01, 1.000000e+00)}}
  %0:3 = fsdp.adamw_step %p, %p, %p, %p step %s {lr = 0.1 : f64, beta2 = 1.0 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<i64>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @adamw_eps(%p: tensor<4xf32>, %s: tensor<i64>) {
  // expected-error @+1 {{learning rate and eps must be >= 0}}
  %0:3 = fsdp.adamw_step %p, %p, %p, %p step %s {lr = 0.1 : f64, eps = -1.0 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<i64>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @clip_norm(%sq: tensor<f32>) {
  // expected-error @+1 {{max_norm must be positive}}
  %n, %c = fsdp.clip_grad_norm %sq {max_norm = 0.0 : f64} : tensor<f32>
  return
}

// -----

func.func @lion_betas(%p: tensor<16xf32>, %s: tensor<i64>) {
  // expected-error @+1 {{betas must be in [0, 1), got (1.000000e+00, 9.900000e-01)}}
  %p2, %m2 = fsdp.lion_step %p, %p, %p step %s {lr = 1.0e-4 : f64, beta1 = 1.0 : f64} : (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<i64>) -> (tensor<16xf32>, tensor<16xf32>)
  return
}

// -----

func.func @lion_state_type(%p: tensor<16xf32>, %m: tensor<8xf32>, %s: tensor<i64>) {
  // expected-error @+1 {{an operand or result has type 'tensor<8xf32>', not the parameter's 'tensor<16xf32>'}}
  %p2, %m2 = fsdp.lion_step %p, %p, %m step %s {lr = 1.0e-4 : f64} : (tensor<16xf32>, tensor<16xf32>, tensor<8xf32>, tensor<i64>) -> (tensor<16xf32>, tensor<8xf32>)
  return
}

// -----

func.func @adafactor_state_size(%p: tensor<4x8xf32>, %st: tensor<32xf32>, %s: tensor<i64>) {
  // A [4, 8] matrix keeps 4 row and 8 column means.
  // expected-error @+1 {{state has 32 elements; the layout needs 12}}
  %p2, %st2 = fsdp.adafactor_step %p, %p, %st step %s {lr = 1.0e-2 : f64} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<32xf32>, tensor<i64>) -> (tensor<4x8xf32>, tensor<32xf32>)
  return
}

// -----

func.func @adafactor_beta2_decay(%p: tensor<8xf32>, %s: tensor<i64>) {
  // expected-error @+1 {{beta2_decay must be <= 0}}
  %p2, %st2 = fsdp.adafactor_step %p, %p, %p step %s {lr = 1.0e-2 : f64, beta2_decay = 0.5 : f64} : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<i64>) -> (tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @adafactor_layout_overlap(%p: tensor<8xf32>) {
  // expected-error @+1 {{parameter 1: offsets must increase without overlap and numel be positive}}
  %st = fsdp.adafactor_stats %p, %p {layout = array<i64: 0, 8, 2, 4, 4, 4, 0, 0>} : (tensor<8xf32>, tensor<8xf32>) -> tensor<14xf32>
  return
}

// -----

func.func @adafactor_layout_rows(%p: tensor<8xf32>) {
  // expected-error @+1 {{parameter 0: rows and cols must both be 0 or divide numel 8}}
  %st = fsdp.adafactor_stats %p, %p {layout = array<i64: 0, 8, 3, 4>} : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return
}

// -----

func.func @adafactor_stats_size(%p: tensor<8xf32>) {
  // Σ param² (1) and the row and column sums (2 + 4).
  // expected-error @+1 {{stats has 6 elements; the layout needs 7}}
  %st = fsdp.adafactor_stats %p, %p {layout = array<i64: 0, 8, 2, 4>} : (tensor<8xf32>, tensor<8xf32>) -> tensor<6xf32>
  return
}

// -----

func.func @adafactor_update_sq(%p: tensor<8xf32>, %state: tensor<6xf32>, %stats: tensor<7xf32>, %s: tensor<i64>) {
  // expected-error @+1 {{update_sq has 2 elements; the layout needs 1}}
  %st2, %u = fsdp.adafactor_factor %p, %p, %state, %stats step %s {layout = array<i64: 0, 8, 2, 4>} : (tensor<8xf32>, tensor<8xf32>, tensor<6xf32>, tensor<7xf32>, tensor<i64>) -> (tensor<6xf32>, tensor<2xf32>)
  return
}

// -----

func.func @adafactor_apply_d(%p: tensor<8xf32>, %state: tensor<6xf32>, %stats: tensor<7xf32>, %u: tensor<1xf32>, %s: tensor<i64>) {
  // expected-error @+1 {{d (the update clipping threshold) must be >= 1}}
  %p2 = fsdp.adafactor_apply %p, %p, %state, %stats, %u step %s {layout = array<i64: 0, 8, 2, 4>, lr = 1.0e-2 : f64, d = 0.5 : f64} : (tensor<8xf32>, tensor<8xf32>, tensor<6xf32>, tensor<7xf32>, tensor<1xf32>, tensor<i64>) -> tensor<8xf32>
  return
}

// -----

func.func @clip_norm_type(%sq: tensor<f32>) {
  // expected-error @+1 {{norm_type must be > 0 or inf, got -2}}
  %n, %c = fsdp.clip_grad_norm %sq {max_norm = 1.0 : f64, norm_type = -2.0 : f64} : tensor<f32>
  return
}

// -----

func.func @broadcast_negative_root(%x: tensor<8xf32>) {
  // expected-error @+1 {{root -1 is not a rank of the 4-rank group}}
  %0 = fsdp.broadcast %x mesh<shard = 4> group shard dtype f32 root -1 : tensor<8xf32>
  return
}

// -----

func.func @unshard_post_forward_group(%x: tensor<8xf32>) {
  // expected-error @+1 {{post-forward group of 3 ranks must be > 1 and divide the shard group's 4}}
  %0 = fsdp.unshard %x unit "a" mesh<shard = 4> {post_forward_group = 3 : i64} : tensor<8xf32> -> !fsdp.token<tensor<24xf32>>
  return
}

// -----

func.func @unshard_post_forward_size(%x: tensor<8xf32>) {
  // expected-error @+1 {{gathers 'tensor<32xf32>' from 'tensor<8xf32>' over 2 ranks}}
  %0 = fsdp.unshard %x unit "a" mesh<shard = 4> {post_forward_group = 2 : i64} : tensor<8xf32> -> !fsdp.token<tensor<32xf32>>
  return
}

// -----

func.func @post_forward_shard_size(%x: tensor<32xf32>) {
  // expected-error @+1 {{keeps 1/2 (> 1) of 'tensor<32xf32>', not 'tensor<8xf32>'}}
  %0 = fsdp.post_forward_shard %x unit "a" group 2 : tensor<32xf32> -> tensor<8xf32>
  return
}

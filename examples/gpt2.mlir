// A small GPT-2 style language model, with nanoGPT's module names:
// token + learned position embeddings, 2 pre-LayerNorm blocks of causal
// multi-head attention (4 heads) and a GELU (tanh) MLP, a final LayerNorm
// and an output projection tied to the token embedding; cross-entropy over
// next-token targets. vocab 64, context 16, width 32, batch 4.
// Initialization as GPT-2: normal(0, 0.02), residual projections
// normal(0, 0.02/sqrt(2 * n_layer)), zero biases, LayerNorm (1, 0).
fsdp.model @gpt2 {
  fsdp.module @root kind "GPT" {
    fsdp.module @transformer kind "ModuleDict" {
      fsdp.module @wte kind "Embedding" {
        fsdp.param @weight : tensor<64x32xf32> init <normal(0.0, 0.02)>
        fsdp.forward (%ids: tensor<4x16xi64>) -> tensor<4x16x32xf32> {
          %w = fsdp.get_param @weight : tensor<64x32xf32>
          %e = nn.embedding %ids, %w : (tensor<4x16xi64>, tensor<64x32xf32>) -> tensor<4x16x32xf32>
          fsdp.return %e : tensor<4x16x32xf32>
        }
      }
      fsdp.module @wpe kind "Embedding" {
        fsdp.param @weight : tensor<16x32xf32> init <normal(0.0, 0.02)>
        fsdp.forward (%ids: tensor<16xi64>) -> tensor<16x32xf32> {
          %w = fsdp.get_param @weight : tensor<16x32xf32>
          %e = nn.embedding %ids, %w : (tensor<16xi64>, tensor<16x32xf32>) -> tensor<16x32xf32>
          fsdp.return %e : tensor<16x32xf32>
        }
      }
      fsdp.module @h kind "ModuleList" {
        fsdp.module @"0" kind "Block" {
          fsdp.module @ln_1 kind "LayerNorm" {
            fsdp.param @weight : tensor<32xf32> init <ones>
            fsdp.param @bias : tensor<32xf32> init <zeros>
            fsdp.forward (%x: tensor<4x16x32xf32>) -> tensor<4x16x32xf32> {
              %w = fsdp.get_param @weight : tensor<32xf32>
              %b = fsdp.get_param @bias : tensor<32xf32>
              %y = nn.layer_norm %x weight %w bias %b {epsilon = 1.0e-05 : f64} : (tensor<4x16x32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<4x16x32xf32>
              fsdp.return %y : tensor<4x16x32xf32>
            }
          }
          fsdp.module @attn kind "CausalSelfAttention" {
            fsdp.module @c_attn kind "Linear" {
              fsdp.param @weight : tensor<96x32xf32> init <normal(0.0, 0.02)>
              fsdp.param @bias : tensor<96xf32> init <zeros>
              fsdp.forward (%x: tensor<4x16x32xf32>) -> tensor<4x16x96xf32> {
                %w = fsdp.get_param @weight : tensor<96x32xf32>
                %b = fsdp.get_param @bias : tensor<96xf32>
                %y = nn.linear %x, %w, %b : (tensor<4x16x32xf32>, tensor<96x32xf32>, tensor<96xf32>) -> tensor<4x16x96xf32>
                fsdp.return %y : tensor<4x16x96xf32>
              }
            }
            fsdp.module @c_proj kind "Linear" {
              fsdp.param @weight : tensor<32x32xf32> init <normal(0.0, 0.01)>
              fsdp.param @bias : tensor<32xf32> init <zeros>
              fsdp.forward (%x: tensor<4x16x32xf32>) -> tensor<4x16x32xf32> {
                %w = fsdp.get_param @weight : tensor<32x32xf32>
                %b = fsdp.get_param @bias : tensor<32xf32>
                %y = nn.linear %x, %w, %b : (tensor<4x16x32xf32>, tensor<32x32xf32>, tensor<32xf32>) -> tensor<4x16x32xf32>
                fsdp.return %y : tensor<4x16x32xf32>
              }
            }
            fsdp.forward (%x: tensor<4x16x32xf32>) -> tensor<4x16x32xf32> {
              %qkv = fsdp.call @c_attn(%x) : (tensor<4x16x32xf32>) -> tensor<4x16x96xf32>
              %q, %k, %v = nn.split %qkv {dim = 2 : i64, sizes = array<i64: 32, 32, 32>} : (tensor<4x16x96xf32>) -> (tensor<4x16x32xf32>, tensor<4x16x32xf32>, tensor<4x16x32xf32>)
              %o = nn.attention %q, %k, %v {causal, num_heads = 4 : i64} : (tensor<4x16x32xf32>, tensor<4x16x32xf32>, tensor<4x16x32xf32>) -> tensor<4x16x32xf32>
              %y = fsdp.call @c_proj(%o) : (tensor<4x16x32xf32>) -> tensor<4x16x32xf32>
              fsdp.return %y : tensor<4x16x32xf32>
            }
          }
          fsdp.module @ln_2 kind "LayerNorm" {
            fsdp.param @weight : tensor<32xf32> init <ones>
            fsdp.param @bias : tensor<32xf32> init <zeros>
            fsdp.forward (%x: tensor<4x16x32xf32>) -> tensor<4x16x32xf32> {
              %w = fsdp.get_param @weight : tensor<32xf32>
              %b = fsdp.get_param @bias : tensor<32xf32>
              %y = nn.layer_norm %x weight %w bias %b {epsilon = 1.0e-05 : f64} : (tensor<4x16x32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<4x16x32xf32>
              fsdp.return %y : tensor<4x16x32xf32>
            }
          }
          fsdp.module @mlp kind "MLP" {
            fsdp.module @c_fc kind "Linear" {
              fsdp.param @weight : tensor<128x32xf32> init <normal(0.0, 0.02)>
              fsdp.param @bias : tensor<128xf32> init <zeros>
              fsdp.forward (%x: tensor<4x16x32xf32>) -> tensor<4x16x128xf32> {
                %w = fsdp.get_param @weight : tensor<128x32xf32>
                %b = fsdp.get_param @bias : tensor<128xf32>
                %y = nn.linear %x, %w, %b : (tensor<4x16x32xf32>, tensor<128x32xf32>, tensor<128xf32>) -> tensor<4x16x128xf32>
                fsdp.return %y : tensor<4x16x128xf32>
              }
            }
            fsdp.module @c_proj kind "Linear" {
              fsdp.param @weight : tensor<32x128xf32> init <normal(0.0, 0.01)>
              fsdp.param @bias : tensor<32xf32> init <zeros>
              fsdp.forward (%x: tensor<4x16x128xf32>) -> tensor<4x16x32xf32> {
                %w = fsdp.get_param @weight : tensor<32x128xf32>
                %b = fsdp.get_param @bias : tensor<32xf32>
                %y = nn.linear %x, %w, %b : (tensor<4x16x128xf32>, tensor<32x128xf32>, tensor<32xf32>) -> tensor<4x16x32xf32>
                fsdp.return %y : tensor<4x16x32xf32>
              }
            }
            fsdp.forward (%x: tensor<4x16x32xf32>) -> tensor<4x16x32xf32> {
              %h = fsdp.call @c_fc(%x) : (tensor<4x16x32xf32>) -> tensor<4x16x128xf32>
              %g = nn.gelu %h {approximate = #nn.approximation<tanh>} : tensor<4x16x128xf32>
              %y = fsdp.call @c_proj(%g) : (tensor<4x16x128xf32>) -> tensor<4x16x32xf32>
              fsdp.return %y : tensor<4x16x32xf32>
            }
          }
          fsdp.forward (%x: tensor<4x16x32xf32>) -> tensor<4x16x32xf32> {
            %0 = fsdp.call @ln_1(%x) : (tensor<4x16x32xf32>) -> tensor<4x16x32xf32>
            %1 = fsdp.call @attn(%0) : (tensor<4x16x32xf32>) -> tensor<4x16x32xf32>
            %2 = nn.add %x, %1 : (tensor<4x16x32xf32>, tensor<4x16x32xf32>) -> tensor<4x16x32xf32>
            %3 = fsdp.call @ln_2(%2) : (tensor<4x16x32xf32>) -> tensor<4x16x32xf32>
            %4 = fsdp.call @mlp(%3) : (tensor<4x16x32xf32>) -> tensor<4x16x32xf32>
            %5 = nn.add %2, %4 : (tensor<4x16x32xf32>, tensor<4x16x32xf32>) -> tensor<4x16x32xf32>
            fsdp.return %5 : tensor<4x16x32xf32>
          }
        }
        fsdp.module @"1" kind "Block" {
          fsdp.module @ln_1 kind "LayerNorm" {
            fsdp.param @weight : tensor<32xf32> init <ones>
            fsdp.param @bias : tensor<32xf32> init <zeros>
            fsdp.forward (%x: tensor<4x16x32xf32>) -> tensor<4x16x32xf32> {
              %w = fsdp.get_param @weight : tensor<32xf32>
              %b = fsdp.get_param @bias : tensor<32xf32>
              %y = nn.layer_norm %x weight %w bias %b {epsilon = 1.0e-05 : f64} : (tensor<4x16x32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<4x16x32xf32>
              fsdp.return %y : tensor<4x16x32xf32>
            }
          }
          fsdp.module @attn kind "CausalSelfAttention" {
            fsdp.module @c_attn kind "Linear" {
              fsdp.param @weight : tensor<96x32xf32> init <normal(0.0, 0.02)>
              fsdp.param @bias : tensor<96xf32> init <zeros>
              fsdp.forward (%x: tensor<4x16x32xf32>) -> tensor<4x16x96xf32> {
                %w = fsdp.get_param @weight : tensor<96x32xf32>
                %b = fsdp.get_param @bias : tensor<96xf32>
                %y = nn.linear %x, %w, %b : (tensor<4x16x32xf32>, tensor<96x32xf32>, tensor<96xf32>) -> tensor<4x16x96xf32>
                fsdp.return %y : tensor<4x16x96xf32>
              }
            }
            fsdp.module @c_proj kind "Linear" {
              fsdp.param @weight : tensor<32x32xf32> init <normal(0.0, 0.01)>
              fsdp.param @bias : tensor<32xf32> init <zeros>
              fsdp.forward (%x: tensor<4x16x32xf32>) -> tensor<4x16x32xf32> {
                %w = fsdp.get_param @weight : tensor<32x32xf32>
                %b = fsdp.get_param @bias : tensor<32xf32>
                %y = nn.linear %x, %w, %b : (tensor<4x16x32xf32>, tensor<32x32xf32>, tensor<32xf32>) -> tensor<4x16x32xf32>
                fsdp.return %y : tensor<4x16x32xf32>
              }
            }
            fsdp.forward (%x: tensor<4x16x32xf32>) -> tensor<4x16x32xf32> {
              %qkv = fsdp.call @c_attn(%x) : (tensor<4x16x32xf32>) -> tensor<4x16x96xf32>
              %q, %k, %v = nn.split %qkv {dim = 2 : i64, sizes = array<i64: 32, 32, 32>} : (tensor<4x16x96xf32>) -> (tensor<4x16x32xf32>, tensor<4x16x32xf32>, tensor<4x16x32xf32>)
              %o = nn.attention %q, %k, %v {causal, num_heads = 4 : i64} : (tensor<4x16x32xf32>, tensor<4x16x32xf32>, tensor<4x16x32xf32>) -> tensor<4x16x32xf32>
              %y = fsdp.call @c_proj(%o) : (tensor<4x16x32xf32>) -> tensor<4x16x32xf32>
              fsdp.return %y : tensor<4x16x32xf32>
            }
          }
          fsdp.module @ln_2 kind "LayerNorm" {
            fsdp.param @weight : tensor<32xf32> init <ones>
            fsdp.param @bias : tensor<32xf32> init <zeros>
            fsdp.forward (%x: tensor<4x16x32xf32>) -> tensor<4x16x32xf32> {
              %w = fsdp.get_param @weight : tensor<32xf32>
              %b = fsdp.get_param @bias : tensor<32xf32>
              %y = nn.layer_norm %x weight %w bias %b {epsilon = 1.0e-05 : f64} : (tensor<4x16x32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<4x16x32xf32>
              fsdp.return %y : tensor<4x16x32xf32>
            }
          }
          fsdp.module @mlp kind "MLP" {
            fsdp.module @c_fc kind "Linear" {
              fsdp.param @weight : tensor<128x32xf32> init <normal(0.0, 0.02)>
              fsdp.param @bias : tensor<128xf32> init <zeros>
              fsdp.forward (%x: tensor<4x16x32xf32>) -> tensor<4x16x128xf32> {
                %w = fsdp.get_param @weight : tensor<128x32xf32>
                %b = fsdp.get_param @bias : tensor<128xf32>
                %y = nn.linear %x, %w, %b : (tensor<4x16x32xf32>, tensor<128x32xf32>, tensor<128xf32>) -> tensor<4x16x128xf32>
                fsdp.return %y : tensor<4x16x128xf32>
              }
            }
            fsdp.module @c_proj kind "Linear" {
              fsdp.param @weight : tensor<32x128xf32> init <normal(0.0, 0.01)>
              fsdp.param @bias : tensor<32xf32> init <zeros>
              fsdp.forward (%x: tensor<4x16x128xf32>) -> tensor<4x16x32xf32> {
                %w = fsdp.get_param @weight : tensor<32x128xf32>
                %b = fsdp.get_param @bias : tensor<32xf32>
                %y = nn.linear %x, %w, %b : (tensor<4x16x128xf32>, tensor<32x128xf32>, tensor<32xf32>) -> tensor<4x16x32xf32>
                fsdp.return %y : tensor<4x16x32xf32>
              }
            }
            fsdp.forward (%x: tensor<4x16x32xf32>) -> tensor<4x16x32xf32> {
              %h = fsdp.call @c_fc(%x) : (tensor<4x16x32xf32>) -> tensor<4x16x128xf32>
              %g = nn.gelu %h {approximate = #nn.approximation<tanh>} : tensor<4x16x128xf32>
              %y = fsdp.call @c_proj(%g) : (tensor<4x16x128xf32>) -> tensor<4x16x32xf32>
              fsdp.return %y : tensor<4x16x32xf32>
            }
          }
          fsdp.forward (%x: tensor<4x16x32xf32>) -> tensor<4x16x32xf32> {
            %0 = fsdp.call @ln_1(%x) : (tensor<4x16x32xf32>) -> tensor<4x16x32xf32>
            %1 = fsdp.call @attn(%0) : (tensor<4x16x32xf32>) -> tensor<4x16x32xf32>
            %2 = nn.add %x, %1 : (tensor<4x16x32xf32>, tensor<4x16x32xf32>) -> tensor<4x16x32xf32>
            %3 = fsdp.call @ln_2(%2) : (tensor<4x16x32xf32>) -> tensor<4x16x32xf32>
            %4 = fsdp.call @mlp(%3) : (tensor<4x16x32xf32>) -> tensor<4x16x32xf32>
            %5 = nn.add %2, %4 : (tensor<4x16x32xf32>, tensor<4x16x32xf32>) -> tensor<4x16x32xf32>
            fsdp.return %5 : tensor<4x16x32xf32>
          }
        }
      }
      fsdp.module @ln_f kind "LayerNorm" {
        fsdp.param @weight : tensor<32xf32> init <ones>
        fsdp.param @bias : tensor<32xf32> init <zeros>
        fsdp.forward (%x: tensor<4x16x32xf32>) -> tensor<4x16x32xf32> {
          %w = fsdp.get_param @weight : tensor<32xf32>
          %b = fsdp.get_param @bias : tensor<32xf32>
          %y = nn.layer_norm %x weight %w bias %b {epsilon = 1.0e-05 : f64} : (tensor<4x16x32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<4x16x32xf32>
          fsdp.return %y : tensor<4x16x32xf32>
        }
      }
    }
    fsdp.forward (%idx: tensor<4x16xi64>, %targets: tensor<4x16xi64>) -> (tensor<f32>, tensor<4x16x64xf32>) {
      %tok = fsdp.call @transformer::@wte(%idx) : (tensor<4x16xi64>) -> tensor<4x16x32xf32>
      %pos = arith.constant dense<[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]> : tensor<16xi64>
      %pos_emb = fsdp.call @transformer::@wpe(%pos) : (tensor<16xi64>) -> tensor<16x32xf32>
      %h0 = nn.add %tok, %pos_emb : (tensor<4x16x32xf32>, tensor<16x32xf32>) -> tensor<4x16x32xf32>
      %h1 = fsdp.call @transformer::@h::@"0"(%h0) : (tensor<4x16x32xf32>) -> tensor<4x16x32xf32>
      %h2 = fsdp.call @transformer::@h::@"1"(%h1) : (tensor<4x16x32xf32>) -> tensor<4x16x32xf32>
      %x = fsdp.call @transformer::@ln_f(%h2) : (tensor<4x16x32xf32>) -> tensor<4x16x32xf32>
      // lm_head shares its weight with wte (weight tying): reading it here makes
      // the root the lowest module enclosing both uses.
      %wte = fsdp.get_param @transformer::@wte::@weight : tensor<64x32xf32>
      %logits = nn.linear %x, %wte : (tensor<4x16x32xf32>, tensor<64x32xf32>) -> tensor<4x16x64xf32>
      %flat_logits = nn.reshape %logits : tensor<4x16x64xf32> to tensor<64x64xf32>
      %flat_targets = nn.reshape %targets : tensor<4x16xi64> to tensor<64xi64>
      %loss = nn.cross_entropy %flat_logits, %flat_targets : (tensor<64x64xf32>, tensor<64xi64>) -> tensor<f32>
      fsdp.return {names = ["loss", "logits"]} %loss, %logits : tensor<f32>, tensor<4x16x64xf32>
    }
  }
}

// Verifier failures on hand-broken IR: each case is a small valid model
// (the first two sections, which verify) with one thing broken.
// RUN: kt-opt %s -split-input-file -verify-diagnostics

kt.model "" class "LlamaForCausalLM" arch "llama" hparams <vocab_size = 10, hidden_size = 8, num_hidden_layers = 1, num_attention_heads = 2, num_key_value_heads = 1, head_dim = 4, intermediate_size = 16, rms_norm_eps = 1.0e-05, rope_theta = 10000.0> {
  kt.base_model "model" class "LlamaModel" {
    kt.embedding "model.embed_tokens" class "torch.nn.Embedding" weight <"token_embd.weight", F32, [8, 10]>
    kt.decoder_layer "model.layers.0" class "LlamaDecoderLayer" {
      kt.gqa_attention "model.layers.0.self_attn" class "LlamaAttention" {
        kt.linear "model.layers.0.self_attn.q_proj" class "torch.nn.Linear" weight <"blk.0.attn_q.weight", F32, [8, 8]>
        kt.linear "model.layers.0.self_attn.k_proj" class "torch.nn.Linear" weight <"blk.0.attn_k.weight", F32, [8, 4]>
        kt.linear "model.layers.0.self_attn.v_proj" class "torch.nn.Linear" weight <"blk.0.attn_v.weight", F32, [8, 4]>
        kt.linear "model.layers.0.self_attn.o_proj" class "torch.nn.Linear" weight <"blk.0.attn_output.weight", F32, [8, 8]>
        kt.rotary_embedding "model.layers.0.self_attn.rotary_emb" class "LlamaRotaryEmbedding" dim 4 theta 10000.0
      }
      kt.mlp "model.layers.0.mlp" class "LlamaMLP" {
        kt.linear "model.layers.0.mlp.gate_proj" class "torch.nn.Linear" weight <"blk.0.ffn_gate.weight", F32, [8, 16]>
        kt.linear "model.layers.0.mlp.up_proj" class "torch.nn.Linear" weight <"blk.0.ffn_up.weight", F32, [8, 16]>
        kt.linear "model.layers.0.mlp.down_proj" class "torch.nn.Linear" weight <"blk.0.ffn_down.weight", F32, [16, 8]>
      }
      kt.rms_norm "model.layers.0.input_layernorm" class "LlamaRMSNorm" eps 1.0e-05 weight <"blk.0.attn_norm.weight", F32, [8]>
      kt.rms_norm "model.layers.0.post_attention_layernorm" class "LlamaRMSNorm" eps 1.0e-05 weight <"blk.0.ffn_norm.weight", F32, [8]>
    }
    kt.rms_norm "model.norm" class "LlamaRMSNorm" eps 1.0e-05 weight <"output_norm.weight", F32, [8]>
  }
  kt.lm_head "lm_head" class "torch.nn.Linear" weight <"output.weight", F32, [8, 10]>
}

// -----

kt.model "" class "DeepseekV3ForCausalLM" arch "deepseek2" hparams <vocab_size = 10, hidden_size = 8, num_hidden_layers = 1, num_attention_heads = 2, num_key_value_heads = 2, rms_norm_eps = 1.0e-06, rope_theta = 10000.0, rope_scaling = <factor = 40.0, original_max_position_embeddings = 4096, log_multiplier = 0.1>, q_lora_rank = 6, kv_lora_rank = 4, qk_nope_head_dim = 2, qk_rope_head_dim = 2, v_head_dim = 3, n_routed_experts = 4, num_experts_per_tok = 2, moe_intermediate_size = 4, n_shared_experts = 1, norm_topk_prob = true, routed_scaling_factor = 2.5, scoring_func = sigmoid, n_group = 2, topk_group = 1> {
  kt.base_model "model" class "DeepseekV3Model" {
    kt.embedding "model.embed_tokens" class "torch.nn.Embedding" weight <"token_embd.weight", F32, [8, 10]>
    kt.decoder_layer "model.layers.0" class "DeepseekV3DecoderLayer" {
      kt.mla_attention "model.layers.0.self_attn" class "DeepseekV3Attention" {
        kt.linear "model.layers.0.self_attn.q_a_proj" class "torch.nn.Linear" weight <"blk.0.attn_q_a.weight", F32, [8, 6]>
        kt.rms_norm "model.layers.0.self_attn.q_a_layernorm" class "DeepseekV3RMSNorm" eps 1.0e-06 weight <"blk.0.attn_q_a_norm.weight", F32, [6]>
        kt.linear "model.layers.0.self_attn.q_b_proj" class "torch.nn.Linear" weight <"blk.0.attn_q_b.weight", F32, [6, 8]>
        kt.linear "model.layers.0.self_attn.kv_a_proj_with_mqa" class "torch.nn.Linear" weight <"blk.0.attn_kv_a_mqa.weight", F32, [8, 6]>
        kt.rms_norm "model.layers.0.self_attn.kv_a_layernorm" class "DeepseekV3RMSNorm" eps 1.0e-06 weight <"blk.0.attn_kv_a_norm.weight", F32, [4]>
        kt.linear "model.layers.0.self_attn.kv_b_proj" class "torch.nn.Linear" weight <"blk.0.attn_kv_b.weight", F32, [4, 10]>
        kt.linear "model.layers.0.self_attn.o_proj" class "torch.nn.Linear" weight <"blk.0.attn_output.weight", F32, [6, 8]>
        kt.rotary_embedding "model.layers.0.self_attn.rotary_emb" class "DeepseekV3YarnRotaryEmbedding" dim 2 theta 10000.0 yarn <factor = 40.0, original_max_position_embeddings = 4096, log_multiplier = 0.1>
      }
      kt.moe "model.layers.0.mlp" class "DeepseekV3MoE" {
        kt.moe_gate "model.layers.0.mlp.gate" class "MoEGate" scoring_func sigmoid top_k 2 norm_topk_prob true routed_scaling_factor 2.5 n_group 2 topk_group 1 weight <"blk.0.ffn_gate_inp.weight", F32, [8, 4]> e_score_correction_bias <"blk.0.exp_probs_b.bias", F32, [4]>
        kt.experts "model.layers.0.mlp.experts" class "torch.nn.ModuleList" gate_proj <"blk.0.ffn_gate_exps.weight", Q4_K, [8, 4, 4]> up_proj <"blk.0.ffn_up_exps.weight", Q4_K, [8, 4, 4]> down_proj <"blk.0.ffn_down_exps.weight", Q6_K, [4, 8, 4]>
        kt.mlp "model.layers.0.mlp.shared_experts" class "DeepseekV3MLP" {
          kt.linear "model.layers.0.mlp.shared_experts.gate_proj" class "torch.nn.Linear" weight <"blk.0.ffn_gate_shexp.weight", F32, [8, 4]>
          kt.linear "model.layers.0.mlp.shared_experts.up_proj" class "torch.nn.Linear" weight <"blk.0.ffn_up_shexp.weight", F32, [8, 4]>
          kt.linear "model.layers.0.mlp.shared_experts.down_proj" class "torch.nn.Linear" weight <"blk.0.ffn_down_shexp.weight", F32, [4, 8]>
        }
      }
      kt.rms_norm "model.layers.0.input_layernorm" class "DeepseekV3RMSNorm" eps 1.0e-06 weight <"blk.0.attn_norm.weight", F32, [8]>
      kt.rms_norm "model.layers.0.post_attention_layernorm" class "DeepseekV3RMSNorm" eps 1.0e-06 weight <"blk.0.ffn_norm.weight", F32, [8]>
    }
    kt.rms_norm "model.norm" class "DeepseekV3RMSNorm" eps 1.0e-06 weight <"output_norm.weight", F32, [8]>
  }
  kt.lm_head "lm_head" class "torch.nn.Linear" weight <"output.weight", F32, [8, 10]>
}

// -----

kt.model "" class "LlamaForCausalLM" arch "llama" hparams <vocab_size = 10, hidden_size = 8, num_hidden_layers = 1, num_attention_heads = 2, num_key_value_heads = 1, head_dim = 4, intermediate_size = 16, rms_norm_eps = 1.0e-05, rope_theta = 10000.0> {
  kt.base_model "model" class "LlamaModel" {
    kt.embedding "model.embed_tokens" class "torch.nn.Embedding" weight <"token_embd.weight", F32, [8, 10]>
    kt.decoder_layer "model.layers.0" class "LlamaDecoderLayer" {
      kt.gqa_attention "model.layers.0.self_attn" class "LlamaAttention" {
        kt.linear "model.layers.0.self_attn.q_proj" class "torch.nn.Linear" weight <"blk.0.attn_q.weight", F32, [8, 8]>
        // expected-error @+1 {{model.layers.0.self_attn.k_proj: weight 'blk.0.attn_k.weight' has shape [8, 8], expected [8, 4]}}
        kt.linear "model.layers.0.self_attn.k_proj" class "torch.nn.Linear" weight <"blk.0.attn_k.weight", F32, [8, 8]>
        kt.linear "model.layers.0.self_attn.v_proj" class "torch.nn.Linear" weight <"blk.0.attn_v.weight", F32, [8, 4]>
        kt.linear "model.layers.0.self_attn.o_proj" class "torch.nn.Linear" weight <"blk.0.attn_output.weight", F32, [8, 8]>
        kt.rotary_embedding "model.layers.0.self_attn.rotary_emb" class "LlamaRotaryEmbedding" dim 4 theta 10000.0
      }
      kt.mlp "model.layers.0.mlp" class "LlamaMLP" {
        kt.linear "model.layers.0.mlp.gate_proj" class "torch.nn.Linear" weight <"blk.0.ffn_gate.weight", F32, [8, 16]>
        kt.linear "model.layers.0.mlp.up_proj" class "torch.nn.Linear" weight <"blk.0.ffn_up.weight", F32, [8, 16]>
        kt.linear "model.layers.0.mlp.down_proj" class "torch.nn.Linear" weight <"blk.0.ffn_down.weight", F32, [16, 8]>
      }
      kt.rms_norm "model.layers.0.input_layernorm" class "LlamaRMSNorm" eps 1.0e-05 weight <"blk.0.attn_norm.weight", F32, [8]>
      kt.rms_norm "model.layers.0.post_attention_layernorm" class "LlamaRMSNorm" eps 1.0e-05 weight <"blk.0.ffn_norm.weight", F32, [8]>
    }
    kt.rms_norm "model.norm" class "LlamaRMSNorm" eps 1.0e-05 weight <"output_norm.weight", F32, [8]>
  }
  kt.lm_head "lm_head" class "torch.nn.Linear" weight <"output.weight", F32, [8, 10]>
}

// -----

kt.model "" class "LlamaForCausalLM" arch "llama" hparams <vocab_size = 10, hidden_size = 8, num_hidden_layers = 1, num_attention_heads = 2, num_key_value_heads = 1, head_dim = 4, intermediate_size = 16, rms_norm_eps = 1.0e-05, rope_theta = 10000.0> {
  kt.base_model "model" class "LlamaModel" {
    kt.embedding "model.embed_tokens" class "torch.nn.Embedding" weight <"token_embd.weight", F32, [8, 10]>
    kt.decoder_layer "model.layers.0" class "LlamaDecoderLayer" {
      kt.gqa_attention "model.layers.0.self_attn" class "LlamaAttention" {
        kt.linear "model.layers.0.self_attn.q_proj" class "torch.nn.Linear" weight <"blk.0.attn_q.weight", F32, [8, 8]>
        kt.linear "model.layers.0.self_attn.k_proj" class "torch.nn.Linear" weight <"blk.0.attn_k.weight", F32, [8, 4]>
        kt.linear "model.layers.0.self_attn.v_proj" class "torch.nn.Linear" weight <"blk.0.attn_v.weight", F32, [8, 4]>
        kt.linear "model.layers.0.self_attn.o_proj" class "torch.nn.Linear" weight <"blk.0.attn_output.weight", F32, [8, 8]>
        kt.rotary_embedding "model.layers.0.self_attn.rotary_emb" class "LlamaRotaryEmbedding" dim 4 theta 10000.0
      }
      kt.mlp "model.layers.0.mlp" class "LlamaMLP" {
        kt.linear "model.layers.0.mlp.gate_proj" class "torch.nn.Linear" weight <"blk.0.ffn_gate.weight", F32, [8, 16]>
        kt.linear "model.layers.0.mlp.up_proj" class "torch.nn.Linear" weight <"blk.0.ffn_up.weight", F32, [8, 16]>
        // expected-error @+1 {{model.layers.0.mlp.down_proj: weight 'blk.0.ffn_down.weight' has shape [8, 16], expected [16, 8]}}
        kt.linear "model.layers.0.mlp.down_proj" class "torch.nn.Linear" weight <"blk.0.ffn_down.weight", F32, [8, 16]>
      }
      kt.rms_norm "model.layers.0.input_layernorm" class "LlamaRMSNorm" eps 1.0e-05 weight <"blk.0.attn_norm.weight", F32, [8]>
      kt.rms_norm "model.layers.0.post_attention_layernorm" class "LlamaRMSNorm" eps 1.0e-05 weight <"blk.0.ffn_norm.weight", F32, [8]>
    }
    kt.rms_norm "model.norm" class "LlamaRMSNorm" eps 1.0e-05 weight <"output_norm.weight", F32, [8]>
  }
  kt.lm_head "lm_head" class "torch.nn.Linear" weight <"output.weight", F32, [8, 10]>
}

// -----

kt.model "" class "LlamaForCausalLM" arch "llama" hparams <vocab_size = 10, hidden_size = 8, num_hidden_layers = 1, num_attention_heads = 2, num_key_value_heads = 1, head_dim = 4, intermediate_size = 16, rms_norm_eps = 1.0e-05, rope_theta = 10000.0> {
  kt.base_model "model" class "LlamaModel" {
    kt.embedding "model.embed_tokens" class "torch.nn.Embedding" weight <"token_embd.weight", F32, [8, 10]>
    kt.decoder_layer "model.layers.0" class "LlamaDecoderLayer" {
      kt.gqa_attention "model.layers.0.self_attn" class "LlamaAttention" {
        kt.linear "model.layers.0.self_attn.q_proj" class "torch.nn.Linear" weight <"blk.0.attn_q.weight", F32, [8, 8]>
        kt.linear "model.layers.0.self_attn.k_proj" class "torch.nn.Linear" weight <"blk.0.attn_k.weight", F32, [8, 4]>
        kt.linear "model.layers.0.self_attn.v_proj" class "torch.nn.Linear" weight <"blk.0.attn_v.weight", F32, [8, 4]>
        kt.linear "model.layers.0.self_attn.o_proj" class "torch.nn.Linear" weight <"blk.0.attn_output.weight", F32, [8, 8]>
        kt.rotary_embedding "model.layers.0.self_attn.rotary_emb" class "LlamaRotaryEmbedding" dim 4 theta 10000.0
      }
      kt.mlp "model.layers.0.mlp" class "LlamaMLP" {
        kt.linear "model.layers.0.mlp.gate_proj" class "torch.nn.Linear" weight <"blk.0.ffn_gate.weight", F32, [8, 16]>
        kt.linear "model.layers.0.mlp.up_proj" class "torch.nn.Linear" weight <"blk.0.ffn_up.weight", F32, [8, 16]>
        kt.linear "model.layers.0.mlp.down_proj" class "torch.nn.Linear" weight <"blk.0.ffn_down.weight", F32, [16, 8]>
      }
      kt.rms_norm "model.layers.0.input_layernorm" class "LlamaRMSNorm" eps 1.0e-05 weight <"blk.0.attn_norm.weight", F32, [8]>
      kt.rms_norm "model.layers.0.post_attention_layernorm" class "LlamaRMSNorm" eps 1.0e-05 weight <"blk.0.ffn_norm.weight", F32, [8]>
    }
    kt.rms_norm "model.norm" class "LlamaRMSNorm" eps 1.0e-05 weight <"output_norm.weight", F32, [8]>
  }
  // expected-error @+1 {{lm_head: weight 'output.weight' has shape [8, 12], expected [8, 10]}}
  kt.lm_head "lm_head" class "torch.nn.Linear" weight <"output.weight", F32, [8, 12]>
}

// -----

kt.model "" class "LlamaForCausalLM" arch "llama" hparams <vocab_size = 10, hidden_size = 8, num_hidden_layers = 1, num_attention_heads = 2, num_key_value_heads = 1, head_dim = 4, intermediate_size = 16, rms_norm_eps = 1.0e-05, rope_theta = 10000.0> {
  kt.base_model "model" class "LlamaModel" {
    kt.embedding "model.embed_tokens" class "torch.nn.Embedding" weight <"token_embd.weight", F32, [8, 10]>
    kt.decoder_layer "model.layers.0" class "LlamaDecoderLayer" {
      kt.gqa_attention "model.layers.0.self_attn" class "LlamaAttention" {
        kt.linear "model.layers.0.self_attn.q_proj" class "torch.nn.Linear" weight <"blk.0.attn_q.weight", F32, [8, 8]>
        // expected-error @+1 {{model.layers.0.self_attn.k_proj: bias 'blk.0.attn_k.bias' has shape [8], expected [4]}}
        kt.linear "model.layers.0.self_attn.k_proj" class "torch.nn.Linear" weight <"blk.0.attn_k.weight", F32, [8, 4]> bias <"blk.0.attn_k.bias", F32, [8]>
        kt.linear "model.layers.0.self_attn.v_proj" class "torch.nn.Linear" weight <"blk.0.attn_v.weight", F32, [8, 4]>
        kt.linear "model.layers.0.self_attn.o_proj" class "torch.nn.Linear" weight <"blk.0.attn_output.weight", F32, [8, 8]>
        kt.rotary_embedding "model.layers.0.self_attn.rotary_emb" class "LlamaRotaryEmbedding" dim 4 theta 10000.0
      }
      kt.mlp "model.layers.0.mlp" class "LlamaMLP" {
        kt.linear "model.layers.0.mlp.gate_proj" class "torch.nn.Linear" weight <"blk.0.ffn_gate.weight", F32, [8, 16]>
        kt.linear "model.layers.0.mlp.up_proj" class "torch.nn.Linear" weight <"blk.0.ffn_up.weight", F32, [8, 16]>
        kt.linear "model.layers.0.mlp.down_proj" class "torch.nn.Linear" weight <"blk.0.ffn_down.weight", F32, [16, 8]>
      }
      kt.rms_norm "model.layers.0.input_layernorm" class "LlamaRMSNorm" eps 1.0e-05 weight <"blk.0.attn_norm.weight", F32, [8]>
      kt.rms_norm "model.layers.0.post_attention_layernorm" class "LlamaRMSNorm" eps 1.0e-05 weight <"blk.0.ffn_norm.weight", F32, [8]>
    }
    kt.rms_norm "model.norm" class "LlamaRMSNorm" eps 1.0e-05 weight <"output_norm.weight", F32, [8]>
  }
  kt.lm_head "lm_head" class "torch.nn.Linear" weight <"output.weight", F32, [8, 10]>
}

// -----

kt.model "" class "LlamaForCausalLM" arch "llama" hparams <vocab_size = 10, hidden_size = 8, num_hidden_layers = 1, num_attention_heads = 2, num_key_value_heads = 1, head_dim = 4, intermediate_size = 16, rms_norm_eps = 1.0e-05, rope_theta = 10000.0> {
  kt.base_model "model" class "LlamaModel" {
    kt.embedding "model.embed_tokens" class "torch.nn.Embedding" weight <"token_embd.weight", F32, [8, 10]>
    kt.decoder_layer "model.layers.0" class "LlamaDecoderLayer" {
      // expected-error @+1 {{model.layers.0.self_attn: missing child 'v_proj' (kt.linear)}}
      kt.gqa_attention "model.layers.0.self_attn" class "LlamaAttention" {
        kt.linear "model.layers.0.self_attn.q_proj" class "torch.nn.Linear" weight <"blk.0.attn_q.weight", F32, [8, 8]>
        kt.linear "model.layers.0.self_attn.k_proj" class "torch.nn.Linear" weight <"blk.0.attn_k.weight", F32, [8, 4]>
        kt.linear "model.layers.0.self_attn.o_proj" class "torch.nn.Linear" weight <"blk.0.attn_output.weight", F32, [8, 8]>
        kt.rotary_embedding "model.layers.0.self_attn.rotary_emb" class "LlamaRotaryEmbedding" dim 4 theta 10000.0
      }
      kt.mlp "model.layers.0.mlp" class "LlamaMLP" {
        kt.linear "model.layers.0.mlp.gate_proj" class "torch.nn.Linear" weight <"blk.0.ffn_gate.weight", F32, [8, 16]>
        kt.linear "model.layers.0.mlp.up_proj" class "torch.nn.Linear" weight <"blk.0.ffn_up.weight", F32, [8, 16]>
        kt.linear "model.layers.0.mlp.down_proj" class "torch.nn.Linear" weight <"blk.0.ffn_down.weight", F32, [16, 8]>
      }
      kt.rms_norm "model.layers.0.input_layernorm" class "LlamaRMSNorm" eps 1.0e-05 weight <"blk.0.attn_norm.weight", F32, [8]>
      kt.rms_norm "model.layers.0.post_attention_layernorm" class "LlamaRMSNorm" eps 1.0e-05 weight <"blk.0.ffn_norm.weight", F32, [8]>
    }
    kt.rms_norm "model.norm" class "LlamaRMSNorm" eps 1.0e-05 weight <"output_norm.weight", F32, [8]>
  }
  kt.lm_head "lm_head" class "torch.nn.Linear" weight <"output.weight", F32, [8, 10]>
}

// -----

kt.model "" class "LlamaForCausalLM" arch "llama" hparams <vocab_size = 10, hidden_size = 8, num_hidden_layers = 1, num_attention_heads = 2, num_key_value_heads = 1, head_dim = 4, intermediate_size = 16, rms_norm_eps = 1.0e-05, rope_theta = 10000.0> {
  kt.base_model "model" class "LlamaModel" {
    kt.embedding "model.embed_tokens" class "torch.nn.Embedding" weight <"token_embd.weight", F32, [8, 10]>
    kt.decoder_layer "model.layers.0" class "LlamaDecoderLayer" {
      kt.gqa_attention "model.layers.0.self_attn" class "LlamaAttention" {
        kt.linear "model.layers.0.self_attn.q_proj" class "torch.nn.Linear" weight <"blk.0.attn_q.weight", F32, [8, 8]>
        kt.linear "model.layers.0.self_attn.k_proj" class "torch.nn.Linear" weight <"blk.0.attn_k.weight", F32, [8, 4]>
        kt.linear "model.layers.0.self_attn.v_proj" class "torch.nn.Linear" weight <"blk.0.attn_v.weight", F32, [8, 4]>
        kt.linear "model.layers.0.self_attn.o_proj" class "torch.nn.Linear" weight <"blk.0.attn_output.weight", F32, [8, 8]>
        // expected-error @+1 {{model.layers.0.self_attn.x_proj: unexpected child 'x_proj' of kt.gqa_attention 'model.layers.0.self_attn'}}
        kt.linear "model.layers.0.self_attn.x_proj" class "torch.nn.Linear" weight <"x", F32, [8, 8]>
        kt.rotary_embedding "model.layers.0.self_attn.rotary_emb" class "LlamaRotaryEmbedding" dim 4 theta 10000.0
      }
      kt.mlp "model.layers.0.mlp" class "LlamaMLP" {
        kt.linear "model.layers.0.mlp.gate_proj" class "torch.nn.Linear" weight <"blk.0.ffn_gate.weight", F32, [8, 16]>
        kt.linear "model.layers.0.mlp.up_proj" class "torch.nn.Linear" weight <"blk.0.ffn_up.weight", F32, [8, 16]>
        kt.linear "model.layers.0.mlp.down_proj" class "torch.nn.Linear" weight <"blk.0.ffn_down.weight", F32, [16, 8]>
      }
      kt.rms_norm "model.layers.0.input_layernorm" class "LlamaRMSNorm" eps 1.0e-05 weight <"blk.0.attn_norm.weight", F32, [8]>
      kt.rms_norm "model.layers.0.post_attention_layernorm" class "LlamaRMSNorm" eps 1.0e-05 weight <"blk.0.ffn_norm.weight", F32, [8]>
    }
    kt.rms_norm "model.norm" class "LlamaRMSNorm" eps 1.0e-05 weight <"output_norm.weight", F32, [8]>
  }
  kt.lm_head "lm_head" class "torch.nn.Linear" weight <"output.weight", F32, [8, 10]>
}

// -----

kt.model "" class "LlamaForCausalLM" arch "llama" hparams <vocab_size = 10, hidden_size = 8, num_hidden_layers = 1, num_attention_heads = 2, num_key_value_heads = 1, head_dim = 4, intermediate_size = 16, rms_norm_eps = 1.0e-05, rope_theta = 10000.0> {
  kt.base_model "model" class "LlamaModel" {
    kt.embedding "model.embed_tokens" class "torch.nn.Embedding" weight <"token_embd.weight", F32, [8, 10]>
    kt.decoder_layer "model.layers.0" class "LlamaDecoderLayer" {
      kt.gqa_attention "model.layers.0.self_attn" class "LlamaAttention" {
        kt.linear "model.layers.0.self_attn.q_proj" class "torch.nn.Linear" weight <"blk.0.attn_q.weight", F32, [8, 8]>
        kt.linear "model.layers.0.self_attn.k_proj" class "torch.nn.Linear" weight <"blk.0.attn_k.weight", F32, [8, 4]>
        kt.linear "model.layers.0.self_attn.v_proj" class "torch.nn.Linear" weight <"blk.0.attn_v.weight", F32, [8, 4]>
        kt.linear "model.layers.0.self_attn.o_proj" class "torch.nn.Linear" weight <"blk.0.attn_output.weight", F32, [8, 8]>
        // expected-error @+1 {{model.layers.0.self_attn.q_proj: appears twice}}
        kt.linear "model.layers.0.self_attn.q_proj" class "torch.nn.Linear" weight <"blk.0.attn_q.weight", F32, [8, 8]>
        kt.rotary_embedding "model.layers.0.self_attn.rotary_emb" class "LlamaRotaryEmbedding" dim 4 theta 10000.0
      }
      kt.mlp "model.layers.0.mlp" class "LlamaMLP" {
        kt.linear "model.layers.0.mlp.gate_proj" class "torch.nn.Linear" weight <"blk.0.ffn_gate.weight", F32, [8, 16]>
        kt.linear "model.layers.0.mlp.up_proj" class "torch.nn.Linear" weight <"blk.0.ffn_up.weight", F32, [8, 16]>
        kt.linear "model.layers.0.mlp.down_proj" class "torch.nn.Linear" weight <"blk.0.ffn_down.weight", F32, [16, 8]>
      }
      kt.rms_norm "model.layers.0.input_layernorm" class "LlamaRMSNorm" eps 1.0e-05 weight <"blk.0.attn_norm.weight", F32, [8]>
      kt.rms_norm "model.layers.0.post_attention_layernorm" class "LlamaRMSNorm" eps 1.0e-05 weight <"blk.0.ffn_norm.weight", F32, [8]>
    }
    kt.rms_norm "model.norm" class "LlamaRMSNorm" eps 1.0e-05 weight <"output_norm.weight", F32, [8]>
  }
  kt.lm_head "lm_head" class "torch.nn.Linear" weight <"output.weight", F32, [8, 10]>
}

// -----

kt.model "" class "LlamaForCausalLM" arch "llama" hparams <vocab_size = 10, hidden_size = 8, num_hidden_layers = 1, num_attention_heads = 2, num_key_value_heads = 1, head_dim = 4, intermediate_size = 16, rms_norm_eps = 1.0e-05, rope_theta = 10000.0> {
  kt.base_model "model" class "LlamaModel" {
    kt.embedding "model.embed_tokens" class "torch.nn.Embedding" weight <"token_embd.weight", F32, [8, 10]>
    kt.decoder_layer "model.layers.0" class "LlamaDecoderLayer" {
      kt.gqa_attention "model.layers.0.self_attn" class "LlamaAttention" {
        kt.linear "model.layers.0.self_attn.q_proj" class "torch.nn.Linear" weight <"blk.0.attn_q.weight", F32, [8, 8]>
        kt.linear "model.layers.0.self_attn.k_proj" class "torch.nn.Linear" weight <"blk.0.attn_k.weight", F32, [8, 4]>
        kt.linear "model.layers.0.self_attn.v_proj" class "torch.nn.Linear" weight <"blk.0.attn_v.weight", F32, [8, 4]>
        kt.linear "model.layers.0.self_attn.o_proj" class "torch.nn.Linear" weight <"blk.0.attn_output.weight", F32, [8, 8]>
        kt.rotary_embedding "model.layers.0.self_attn.rotary_emb" class "LlamaRotaryEmbedding" dim 4 theta 10000.0
      }
      kt.mlp "model.layers.0.mlp" class "LlamaMLP" {
        kt.linear "model.layers.0.mlp.gate_proj" class "torch.nn.Linear" weight <"blk.0.ffn_gate.weight", F32, [8, 16]>
        kt.linear "model.layers.0.mlp.up_proj" class "torch.nn.Linear" weight <"blk.0.ffn_up.weight", F32, [8, 16]>
        kt.linear "model.layers.0.mlp.down_proj" class "torch.nn.Linear" weight <"blk.0.ffn_down.weight", F32, [16, 8]>
      }
      // expected-error @+1 {{model.layers.0.input_layernorm: is a kt.linear, expected a kt.rms_norm}}
      kt.linear "model.layers.0.input_layernorm" class "torch.nn.Linear" weight <"blk.0.attn_norm.weight", F32, [8]>
      kt.rms_norm "model.layers.0.post_attention_layernorm" class "LlamaRMSNorm" eps 1.0e-05 weight <"blk.0.ffn_norm.weight", F32, [8]>
    }
    kt.rms_norm "model.norm" class "LlamaRMSNorm" eps 1.0e-05 weight <"output_norm.weight", F32, [8]>
  }
  kt.lm_head "lm_head" class "torch.nn.Linear" weight <"output.weight", F32, [8, 10]>
}

// -----

kt.model "" class "LlamaForCausalLM" arch "llama" hparams <vocab_size = 10, hidden_size = 8, num_hidden_layers = 1, num_attention_heads = 2, num_key_value_heads = 1, head_dim = 4, intermediate_size = 16, rms_norm_eps = 1.0e-05, rope_theta = 10000.0> {
  kt.base_model "model" class "LlamaModel" {
    kt.embedding "model.embed_tokens" class "torch.nn.Embedding" weight <"token_embd.weight", F32, [8, 10]>
    kt.decoder_layer "model.layers.0" class "LlamaDecoderLayer" {
      kt.gqa_attention "model.layers.0.self_attn" class "LlamaAttention" {
        // expected-error @+1 {{path 'model.layers.1.self_attn.q_proj' is not inside its parent's path 'model.layers.0.self_attn'}}
        kt.linear "model.layers.1.self_attn.q_proj" class "torch.nn.Linear" weight <"blk.0.attn_q.weight", F32, [8, 8]>
        kt.linear "model.layers.0.self_attn.k_proj" class "torch.nn.Linear" weight <"blk.0.attn_k.weight", F32, [8, 4]>
        kt.linear "model.layers.0.self_attn.v_proj" class "torch.nn.Linear" weight <"blk.0.attn_v.weight", F32, [8, 4]>
        kt.linear "model.layers.0.self_attn.o_proj" class "torch.nn.Linear" weight <"blk.0.attn_output.weight", F32, [8, 8]>
        kt.rotary_embedding "model.layers.0.self_attn.rotary_emb" class "LlamaRotaryEmbedding" dim 4 theta 10000.0
      }
      kt.mlp "model.layers.0.mlp" class "LlamaMLP" {
        kt.linear "model.layers.0.mlp.gate_proj" class "torch.nn.Linear" weight <"blk.0.ffn_gate.weight", F32, [8, 16]>
        kt.linear "model.layers.0.mlp.up_proj" class "torch.nn.Linear" weight <"blk.0.ffn_up.weight", F32, [8, 16]>
        kt.linear "model.layers.0.mlp.down_proj" class "torch.nn.Linear" weight <"blk.0.ffn_down.weight", F32, [16, 8]>
      }
      kt.rms_norm "model.layers.0.input_layernorm" class "LlamaRMSNorm" eps 1.0e-05 weight <"blk.0.attn_norm.weight", F32, [8]>
      kt.rms_norm "model.layers.0.post_attention_layernorm" class "LlamaRMSNorm" eps 1.0e-05 weight <"blk.0.ffn_norm.weight", F32, [8]>
    }
    kt.rms_norm "model.norm" class "LlamaRMSNorm" eps 1.0e-05 weight <"output_norm.weight", F32, [8]>
  }
  kt.lm_head "lm_head" class "torch.nn.Linear" weight <"output.weight", F32, [8, 10]>
}

// -----

kt.model "" class "LlamaForCausalLM" arch "llama" hparams <vocab_size = 10, hidden_size = 8, num_hidden_layers = 2, num_attention_heads = 2, num_key_value_heads = 1, head_dim = 4, intermediate_size = 16, rms_norm_eps = 1.0e-05, rope_theta = 10000.0> {
  // expected-error @+1 {{model: missing child 'layers.1' (kt.decoder_layer)}}
  kt.base_model "model" class "LlamaModel" {
    kt.embedding "model.embed_tokens" class "torch.nn.Embedding" weight <"token_embd.weight", F32, [8, 10]>
    kt.decoder_layer "model.layers.0" class "LlamaDecoderLayer" {
      kt.gqa_attention "model.layers.0.self_attn" class "LlamaAttention" {
        kt.linear "model.layers.0.self_attn.q_proj" class "torch.nn.Linear" weight <"blk.0.attn_q.weight", F32, [8, 8]>
        kt.linear "model.layers.0.self_attn.k_proj" class "torch.nn.Linear" weight <"blk.0.attn_k.weight", F32, [8, 4]>
        kt.linear "model.layers.0.self_attn.v_proj" class "torch.nn.Linear" weight <"blk.0.attn_v.weight", F32, [8, 4]>
        kt.linear "model.layers.0.self_attn.o_proj" class "torch.nn.Linear" weight <"blk.0.attn_output.weight", F32, [8, 8]>
        kt.rotary_embedding "model.layers.0.self_attn.rotary_emb" class "LlamaRotaryEmbedding" dim 4 theta 10000.0
      }
      kt.mlp "model.layers.0.mlp" class "LlamaMLP" {
        kt.linear "model.layers.0.mlp.gate_proj" class "torch.nn.Linear" weight <"blk.0.ffn_gate.weight", F32, [8, 16]>
        kt.linear "model.layers.0.mlp.up_proj" class "torch.nn.Linear" weight <"blk.0.ffn_up.weight", F32, [8, 16]>
        kt.linear "model.layers.0.mlp.down_proj" class "torch.nn.Linear" weight <"blk.0.ffn_down.weight", F32, [16, 8]>
      }
      kt.rms_norm "model.layers.0.input_layernorm" class "LlamaRMSNorm" eps 1.0e-05 weight <"blk.0.attn_norm.weight", F32, [8]>
      kt.rms_norm "model.layers.0.post_attention_layernorm" class "LlamaRMSNorm" eps 1.0e-05 weight <"blk.0.ffn_norm.weight", F32, [8]>
    }
    kt.rms_norm "model.norm" class "LlamaRMSNorm" eps 1.0e-05 weight <"output_norm.weight", F32, [8]>
  }
  kt.lm_head "lm_head" class "torch.nn.Linear" weight <"output.weight", F32, [8, 10]>
}

// -----

kt.model "" class "LlamaForCausalLM" arch "llama" hparams <vocab_size = 10, hidden_size = 8, num_hidden_layers = 1, num_attention_heads = 2, num_key_value_heads = 1, head_dim = 4, intermediate_size = 16, rms_norm_eps = 1.0e-05, rope_theta = 10000.0> {
  kt.base_model "model" class "LlamaModel" {
    kt.embedding "model.embed_tokens" class "torch.nn.Embedding" weight <"token_embd.weight", F32, [8, 10]>
    kt.decoder_layer "model.layers.0" class "LlamaDecoderLayer" {
      kt.gqa_attention "model.layers.0.self_attn" class "LlamaAttention" {
        kt.linear "model.layers.0.self_attn.q_proj" class "torch.nn.Linear" weight <"blk.0.attn_q.weight", F32, [8, 8]>
        kt.linear "model.layers.0.self_attn.k_proj" class "torch.nn.Linear" weight <"blk.0.attn_k.weight", F32, [8, 4]>
        kt.linear "model.layers.0.self_attn.v_proj" class "torch.nn.Linear" weight <"blk.0.attn_v.weight", F32, [8, 4]>
        kt.linear "model.layers.0.self_attn.o_proj" class "torch.nn.Linear" weight <"blk.0.attn_output.weight", F32, [8, 8]>
        kt.rotary_embedding "model.layers.0.self_attn.rotary_emb" class "LlamaRotaryEmbedding" dim 4 theta 10000.0
      }
      kt.mlp "model.layers.0.mlp" class "LlamaMLP" {
        // expected-error @+1 {{model.layers.0.mlp.norm: unexpected child 'norm' of kt.mlp 'model.layers.0.mlp'}}
        kt.rms_norm "model.layers.0.mlp.norm" class "LlamaRMSNorm" eps 1.0e-05 weight <"n", F32, [8]>
        kt.linear "model.layers.0.mlp.gate_proj" class "torch.nn.Linear" weight <"blk.0.ffn_gate.weight", F32, [8, 16]>
        kt.linear "model.layers.0.mlp.up_proj" class "torch.nn.Linear" weight <"blk.0.ffn_up.weight", F32, [8, 16]>
        kt.linear "model.layers.0.mlp.down_proj" class "torch.nn.Linear" weight <"blk.0.ffn_down.weight", F32, [16, 8]>
      }
      kt.rms_norm "model.layers.0.input_layernorm" class "LlamaRMSNorm" eps 1.0e-05 weight <"blk.0.attn_norm.weight", F32, [8]>
      kt.rms_norm "model.layers.0.post_attention_layernorm" class "LlamaRMSNorm" eps 1.0e-05 weight <"blk.0.ffn_norm.weight", F32, [8]>
    }
    kt.rms_norm "model.norm" class "LlamaRMSNorm" eps 1.0e-05 weight <"output_norm.weight", F32, [8]>
  }
  kt.lm_head "lm_head" class "torch.nn.Linear" weight <"output.weight", F32, [8, 10]>
}

// -----

kt.model "" class "LlamaForCausalLM" arch "llama" hparams <vocab_size = 10, hidden_size = 8, num_hidden_layers = 1, num_attention_heads = 2, num_key_value_heads = 1, head_dim = 4, intermediate_size = 16, rms_norm_eps = 1.0e-05, rope_theta = 10000.0> {
  kt.base_model "model" class "LlamaModel" {
    kt.embedding "model.embed_tokens" class "torch.nn.Embedding" weight <"token_embd.weight", F32, [8, 10]>
    kt.decoder_layer "model.layers.0" class "LlamaDecoderLayer" {
      kt.gqa_attention "model.layers.0.self_attn" class "LlamaAttention" {
        kt.linear "model.layers.0.self_attn.q_proj" class "torch.nn.Linear" weight <"blk.0.attn_q.weight", F32, [8, 8]>
        kt.linear "model.layers.0.self_attn.k_proj" class "torch.nn.Linear" weight <"blk.0.attn_k.weight", F32, [8, 4]>
        kt.linear "model.layers.0.self_attn.v_proj" class "torch.nn.Linear" weight <"blk.0.attn_v.weight", F32, [8, 4]>
        kt.linear "model.layers.0.self_attn.o_proj" class "torch.nn.Linear" weight <"blk.0.attn_output.weight", F32, [8, 8]>
        kt.rotary_embedding "model.layers.0.self_attn.rotary_emb" class "LlamaRotaryEmbedding" dim 4 theta 10000.0
      }
      kt.mlp "model.layers.0.mlp" class "LlamaMLP" {
        kt.linear "model.layers.0.mlp.gate_proj" class "torch.nn.Linear" weight <"blk.0.ffn_gate.weight", F32, [8, 16]>
        kt.linear "model.layers.0.mlp.up_proj" class "torch.nn.Linear" weight <"blk.0.ffn_up.weight", F32, [8, 16]>
        kt.linear "model.layers.0.mlp.down_proj" class "torch.nn.Linear" weight <"blk.0.ffn_down.weight", F32, [16, 8]>
      }
      kt.rms_norm "model.layers.0.input_layernorm" class "LlamaRMSNorm" eps 1.0e-05 weight <"blk.0.attn_norm.weight", F32, [8]>
      kt.rms_norm "model.layers.0.post_attention_layernorm" class "LlamaRMSNorm" eps 1.0e-05 weight <"blk.0.ffn_norm.weight", F32, [8]>
    }
    // expected-error @+1 {{model.norm: eps is 1e-06 but the model's rms_norm_eps is 1e-05}}
    kt.rms_norm "model.norm" class "LlamaRMSNorm" eps 1.0e-06 weight <"output_norm.weight", F32, [8]>
  }
  kt.lm_head "lm_head" class "torch.nn.Linear" weight <"output.weight", F32, [8, 10]>
}

// -----

kt.model "" class "LlamaForCausalLM" arch "llama" hparams <vocab_size = 10, hidden_size = 8, num_hidden_layers = 1, num_attention_heads = 2, num_key_value_heads = 1, head_dim = 4, intermediate_size = 16, rms_norm_eps = 1.0e-05, rope_theta = 10000.0> {
  kt.base_model "model" class "LlamaModel" {
    kt.embedding "model.embed_tokens" class "torch.nn.Embedding" weight <"token_embd.weight", F32, [8, 10]>
    kt.decoder_layer "model.layers.0" class "LlamaDecoderLayer" {
      kt.gqa_attention "model.layers.0.self_attn" class "LlamaAttention" {
        kt.linear "model.layers.0.self_attn.q_proj" class "torch.nn.Linear" weight <"blk.0.attn_q.weight", F32, [8, 8]>
        kt.linear "model.layers.0.self_attn.k_proj" class "torch.nn.Linear" weight <"blk.0.attn_k.weight", F32, [8, 4]>
        kt.linear "model.layers.0.self_attn.v_proj" class "torch.nn.Linear" weight <"blk.0.attn_v.weight", F32, [8, 4]>
        kt.linear "model.layers.0.self_attn.o_proj" class "torch.nn.Linear" weight <"blk.0.attn_output.weight", F32, [8, 8]>
        // expected-error @+1 {{model.layers.0.self_attn.rotary_emb: dim is 8, expected 4}}
        kt.rotary_embedding "model.layers.0.self_attn.rotary_emb" class "LlamaRotaryEmbedding" dim 8 theta 10000.0
      }
      kt.mlp "model.layers.0.mlp" class "LlamaMLP" {
        kt.linear "model.layers.0.mlp.gate_proj" class "torch.nn.Linear" weight <"blk.0.ffn_gate.weight", F32, [8, 16]>
        kt.linear "model.layers.0.mlp.up_proj" class "torch.nn.Linear" weight <"blk.0.ffn_up.weight", F32, [8, 16]>
        kt.linear "model.layers.0.mlp.down_proj" class "torch.nn.Linear" weight <"blk.0.ffn_down.weight", F32, [16, 8]>
      }
      kt.rms_norm "model.layers.0.input_layernorm" class "LlamaRMSNorm" eps 1.0e-05 weight <"blk.0.attn_norm.weight", F32, [8]>
      kt.rms_norm "model.layers.0.post_attention_layernorm" class "LlamaRMSNorm" eps 1.0e-05 weight <"blk.0.ffn_norm.weight", F32, [8]>
    }
    kt.rms_norm "model.norm" class "LlamaRMSNorm" eps 1.0e-05 weight <"output_norm.weight", F32, [8]>
  }
  kt.lm_head "lm_head" class "torch.nn.Linear" weight <"output.weight", F32, [8, 10]>
}

// -----

kt.model "" class "LlamaForCausalLM" arch "llama" hparams <vocab_size = 10, hidden_size = 8, num_hidden_layers = 1, num_attention_heads = 2, num_key_value_heads = 1, head_dim = 4, intermediate_size = 16, rms_norm_eps = 1.0e-05, rope_theta = 10000.0> {
  kt.base_model "model" class "LlamaModel" {
    kt.embedding "model.embed_tokens" class "torch.nn.Embedding" weight <"token_embd.weight", F32, [8, 10]>
    kt.decoder_layer "model.layers.0" class "LlamaDecoderLayer" {
      kt.gqa_attention "model.layers.0.self_attn" class "LlamaAttention" {
        kt.linear "model.layers.0.self_attn.q_proj" class "torch.nn.Linear" weight <"blk.0.attn_q.weight", F32, [8, 8]>
        kt.linear "model.layers.0.self_attn.k_proj" class "torch.nn.Linear" weight <"blk.0.attn_k.weight", F32, [8, 4]>
        kt.linear "model.layers.0.self_attn.v_proj" class "torch.nn.Linear" weight <"blk.0.attn_v.weight", F32, [8, 4]>
        kt.linear "model.layers.0.self_attn.o_proj" class "torch.nn.Linear" weight <"blk.0.attn_output.weight", F32, [8, 8]>
        // expected-error @+1 {{model.layers.0.self_attn.rotary_emb: theta is 5e+05 but the model's rope_theta is 10000}}
        kt.rotary_embedding "model.layers.0.self_attn.rotary_emb" class "LlamaRotaryEmbedding" dim 4 theta 500000.0
      }
      kt.mlp "model.layers.0.mlp" class "LlamaMLP" {
        kt.linear "model.layers.0.mlp.gate_proj" class "torch.nn.Linear" weight <"blk.0.ffn_gate.weight", F32, [8, 16]>
        kt.linear "model.layers.0.mlp.up_proj" class "torch.nn.Linear" weight <"blk.0.ffn_up.weight", F32, [8, 16]>
        kt.linear "model.layers.0.mlp.down_proj" class "torch.nn.Linear" weight <"blk.0.ffn_down.weight", F32, [16, 8]>
      }
      kt.rms_norm "model.layers.0.input_layernorm" class "LlamaRMSNorm" eps 1.0e-05 weight <"blk.0.attn_norm.weight", F32, [8]>
      kt.rms_norm "model.layers.0.post_attention_layernorm" class "LlamaRMSNorm" eps 1.0e-05 weight <"blk.0.ffn_norm.weight", F32, [8]>
    }
    kt.rms_norm "model.norm" class "LlamaRMSNorm" eps 1.0e-05 weight <"output_norm.weight", F32, [8]>
  }
  kt.lm_head "lm_head" class "torch.nn.Linear" weight <"output.weight", F32, [8, 10]>
}

// -----

// expected-error @+1 {{<root>: hparams: num_attention_heads must be a multiple of num_key_value_heads}}
kt.model "" class "LlamaForCausalLM" arch "llama" hparams <vocab_size = 10, hidden_size = 8, num_hidden_layers = 1, num_attention_heads = 2, num_key_value_heads = 3, head_dim = 4, intermediate_size = 16, rms_norm_eps = 1.0e-05, rope_theta = 10000.0> {
  kt.base_model "model" class "LlamaModel" {
    kt.embedding "model.embed_tokens" class "torch.nn.Embedding" weight <"token_embd.weight", F32, [8, 10]>
    kt.decoder_layer "model.layers.0" class "LlamaDecoderLayer" {
      kt.gqa_attention "model.layers.0.self_attn" class "LlamaAttention" {
        kt.linear "model.layers.0.self_attn.q_proj" class "torch.nn.Linear" weight <"blk.0.attn_q.weight", F32, [8, 8]>
        kt.linear "model.layers.0.self_attn.k_proj" class "torch.nn.Linear" weight <"blk.0.attn_k.weight", F32, [8, 4]>
        kt.linear "model.layers.0.self_attn.v_proj" class "torch.nn.Linear" weight <"blk.0.attn_v.weight", F32, [8, 4]>
        kt.linear "model.layers.0.self_attn.o_proj" class "torch.nn.Linear" weight <"blk.0.attn_output.weight", F32, [8, 8]>
        kt.rotary_embedding "model.layers.0.self_attn.rotary_emb" class "LlamaRotaryEmbedding" dim 4 theta 10000.0
      }
      kt.mlp "model.layers.0.mlp" class "LlamaMLP" {
        kt.linear "model.layers.0.mlp.gate_proj" class "torch.nn.Linear" weight <"blk.0.ffn_gate.weight", F32, [8, 16]>
        kt.linear "model.layers.0.mlp.up_proj" class "torch.nn.Linear" weight <"blk.0.ffn_up.weight", F32, [8, 16]>
        kt.linear "model.layers.0.mlp.down_proj" class "torch.nn.Linear" weight <"blk.0.ffn_down.weight", F32, [16, 8]>
      }
      kt.rms_norm "model.layers.0.input_layernorm" class "LlamaRMSNorm" eps 1.0e-05 weight <"blk.0.attn_norm.weight", F32, [8]>
      kt.rms_norm "model.layers.0.post_attention_layernorm" class "LlamaRMSNorm" eps 1.0e-05 weight <"blk.0.ffn_norm.weight", F32, [8]>
    }
    kt.rms_norm "model.norm" class "LlamaRMSNorm" eps 1.0e-05 weight <"output_norm.weight", F32, [8]>
  }
  kt.lm_head "lm_head" class "torch.nn.Linear" weight <"output.weight", F32, [8, 10]>
}

// -----

kt.model "" class "LlamaForCausalLM" arch "llama" hparams <vocab_size = 10, hidden_size = 8, num_hidden_layers = 1, num_attention_heads = 2, num_key_value_heads = 1, head_dim = 4, intermediate_size = 16, rms_norm_eps = 1.0e-05, rope_theta = 10000.0> {
  kt.base_model "model" class "LlamaModel" {
    kt.embedding "model.embed_tokens" class "torch.nn.Embedding" weight <"token_embd.weight", F32, [8, 10]>
    kt.decoder_layer "model.layers.0" class "LlamaDecoderLayer" {
      kt.gqa_attention "model.layers.0.self_attn" class "LlamaAttention" {
        // expected-error @+1 {{weight 'blk.0.attn_q.weight' has dimension 0}}
        kt.linear "model.layers.0.self_attn.q_proj" class "torch.nn.Linear" weight <"blk.0.attn_q.weight", F32, [8, 0]>
        kt.linear "model.layers.0.self_attn.k_proj" class "torch.nn.Linear" weight <"blk.0.attn_k.weight", F32, [8, 4]>
        kt.linear "model.layers.0.self_attn.v_proj" class "torch.nn.Linear" weight <"blk.0.attn_v.weight", F32, [8, 4]>
        kt.linear "model.layers.0.self_attn.o_proj" class "torch.nn.Linear" weight <"blk.0.attn_output.weight", F32, [8, 8]>
        kt.rotary_embedding "model.layers.0.self_attn.rotary_emb" class "LlamaRotaryEmbedding" dim 4 theta 10000.0
      }
      kt.mlp "model.layers.0.mlp" class "LlamaMLP" {
        kt.linear "model.layers.0.mlp.gate_proj" class "torch.nn.Linear" weight <"blk.0.ffn_gate.weight", F32, [8, 16]>
        kt.linear "model.layers.0.mlp.up_proj" class "torch.nn.Linear" weight <"blk.0.ffn_up.weight", F32, [8, 16]>
        kt.linear "model.layers.0.mlp.down_proj" class "torch.nn.Linear" weight <"blk.0.ffn_down.weight", F32, [16, 8]>
      }
      kt.rms_norm "model.layers.0.input_layernorm" class "LlamaRMSNorm" eps 1.0e-05 weight <"blk.0.attn_norm.weight", F32, [8]>
      kt.rms_norm "model.layers.0.post_attention_layernorm" class "LlamaRMSNorm" eps 1.0e-05 weight <"blk.0.ffn_norm.weight", F32, [8]>
    }
    kt.rms_norm "model.norm" class "LlamaRMSNorm" eps 1.0e-05 weight <"output_norm.weight", F32, [8]>
  }
  kt.lm_head "lm_head" class "torch.nn.Linear" weight <"output.weight", F32, [8, 10]>
}

// -----

kt.model "" class "DeepseekV3ForCausalLM" arch "deepseek2" hparams <vocab_size = 10, hidden_size = 8, num_hidden_layers = 1, num_attention_heads = 2, num_key_value_heads = 2, rms_norm_eps = 1.0e-06, rope_theta = 10000.0, rope_scaling = <factor = 40.0, original_max_position_embeddings = 4096, log_multiplier = 0.1>, q_lora_rank = 6, kv_lora_rank = 4, qk_nope_head_dim = 2, qk_rope_head_dim = 2, v_head_dim = 3, n_routed_experts = 4, num_experts_per_tok = 2, moe_intermediate_size = 4, n_shared_experts = 1, norm_topk_prob = true, routed_scaling_factor = 2.5, scoring_func = sigmoid, n_group = 2, topk_group = 1> {
  kt.base_model "model" class "DeepseekV3Model" {
    kt.embedding "model.embed_tokens" class "torch.nn.Embedding" weight <"token_embd.weight", F32, [8, 10]>
    kt.decoder_layer "model.layers.0" class "DeepseekV3DecoderLayer" {
      kt.mla_attention "model.layers.0.self_attn" class "DeepseekV3Attention" {
        kt.linear "model.layers.0.self_attn.q_a_proj" class "torch.nn.Linear" weight <"blk.0.attn_q_a.weight", F32, [8, 6]>
        kt.rms_norm "model.layers.0.self_attn.q_a_layernorm" class "DeepseekV3RMSNorm" eps 1.0e-06 weight <"blk.0.attn_q_a_norm.weight", F32, [6]>
        kt.linear "model.layers.0.self_attn.q_b_proj" class "torch.nn.Linear" weight <"blk.0.attn_q_b.weight", F32, [6, 8]>
        kt.linear "model.layers.0.self_attn.kv_a_proj_with_mqa" class "torch.nn.Linear" weight <"blk.0.attn_kv_a_mqa.weight", F32, [8, 6]>
        kt.rms_norm "model.layers.0.self_attn.kv_a_layernorm" class "DeepseekV3RMSNorm" eps 1.0e-06 weight <"blk.0.attn_kv_a_norm.weight", F32, [4]>
        kt.linear "model.layers.0.self_attn.kv_b_proj" class "torch.nn.Linear" weight <"blk.0.attn_kv_b.weight", F32, [4, 10]>
        kt.linear "model.layers.0.self_attn.o_proj" class "torch.nn.Linear" weight <"blk.0.attn_output.weight", F32, [6, 8]>
        kt.rotary_embedding "model.layers.0.self_attn.rotary_emb" class "DeepseekV3YarnRotaryEmbedding" dim 2 theta 10000.0 yarn <factor = 40.0, original_max_position_embeddings = 4096, log_multiplier = 0.1>
      }
      kt.moe "model.layers.0.mlp" class "DeepseekV3MoE" {
        // expected-error @+1 {{model.layers.0.mlp.gate: top_k (num_experts_per_tok) differs from the model's}}
        kt.moe_gate "model.layers.0.mlp.gate" class "MoEGate" scoring_func sigmoid top_k 3 norm_topk_prob true routed_scaling_factor 2.5 n_group 2 topk_group 1 weight <"blk.0.ffn_gate_inp.weight", F32, [8, 4]> e_score_correction_bias <"blk.0.exp_probs_b.bias", F32, [4]>
        kt.experts "model.layers.0.mlp.experts" class "torch.nn.ModuleList" gate_proj <"blk.0.ffn_gate_exps.weight", Q4_K, [8, 4, 4]> up_proj <"blk.0.ffn_up_exps.weight", Q4_K, [8, 4, 4]> down_proj <"blk.0.ffn_down_exps.weight", Q6_K, [4, 8, 4]>
        kt.mlp "model.layers.0.mlp.shared_experts" class "DeepseekV3MLP" {
          kt.linear "model.layers.0.mlp.shared_experts.gate_proj" class "torch.nn.Linear" weight <"blk.0.ffn_gate_shexp.weight", F32, [8, 4]>
          kt.linear "model.layers.0.mlp.shared_experts.up_proj" class "torch.nn.Linear" weight <"blk.0.ffn_up_shexp.weight", F32, [8, 4]>
          kt.linear "model.layers.0.mlp.shared_experts.down_proj" class "torch.nn.Linear" weight <"blk.0.ffn_down_shexp.weight", F32, [4, 8]>
        }
      }
      kt.rms_norm "model.layers.0.input_layernorm" class "DeepseekV3RMSNorm" eps 1.0e-06 weight <"blk.0.attn_norm.weight", F32, [8]>
      kt.rms_norm "model.layers.0.post_attention_layernorm" class "DeepseekV3RMSNorm" eps 1.0e-06 weight <"blk.0.ffn_norm.weight", F32, [8]>
    }
    kt.rms_norm "model.norm" class "DeepseekV3RMSNorm" eps 1.0e-06 weight <"output_norm.weight", F32, [8]>
  }
  kt.lm_head "lm_head" class "torch.nn.Linear" weight <"output.weight", F32, [8, 10]>
}

// -----

kt.model "" class "DeepseekV3ForCausalLM" arch "deepseek2" hparams <vocab_size = 10, hidden_size = 8, num_hidden_layers = 1, num_attention_heads = 2, num_key_value_heads = 2, rms_norm_eps = 1.0e-06, rope_theta = 10000.0, rope_scaling = <factor = 40.0, original_max_position_embeddings = 4096, log_multiplier = 0.1>, q_lora_rank = 6, kv_lora_rank = 4, qk_nope_head_dim = 2, qk_rope_head_dim = 2, v_head_dim = 3, n_routed_experts = 4, num_experts_per_tok = 2, moe_intermediate_size = 4, n_shared_experts = 1, norm_topk_prob = true, routed_scaling_factor = 2.5, scoring_func = sigmoid, n_group = 2, topk_group = 1> {
  kt.base_model "model" class "DeepseekV3Model" {
    kt.embedding "model.embed_tokens" class "torch.nn.Embedding" weight <"token_embd.weight", F32, [8, 10]>
    kt.decoder_layer "model.layers.0" class "DeepseekV3DecoderLayer" {
      kt.mla_attention "model.layers.0.self_attn" class "DeepseekV3Attention" {
        kt.linear "model.layers.0.self_attn.q_a_proj" class "torch.nn.Linear" weight <"blk.0.attn_q_a.weight", F32, [8, 6]>
        kt.rms_norm "model.layers.0.self_attn.q_a_layernorm" class "DeepseekV3RMSNorm" eps 1.0e-06 weight <"blk.0.attn_q_a_norm.weight", F32, [6]>
        kt.linear "model.layers.0.self_attn.q_b_proj" class "torch.nn.Linear" weight <"blk.0.attn_q_b.weight", F32, [6, 8]>
        kt.linear "model.layers.0.self_attn.kv_a_proj_with_mqa" class "torch.nn.Linear" weight <"blk.0.attn_kv_a_mqa.weight", F32, [8, 6]>
        kt.rms_norm "model.layers.0.self_attn.kv_a_layernorm" class "DeepseekV3RMSNorm" eps 1.0e-06 weight <"blk.0.attn_kv_a_norm.weight", F32, [4]>
        kt.linear "model.layers.0.self_attn.kv_b_proj" class "torch.nn.Linear" weight <"blk.0.attn_kv_b.weight", F32, [4, 10]>
        kt.linear "model.layers.0.self_attn.o_proj" class "torch.nn.Linear" weight <"blk.0.attn_output.weight", F32, [6, 8]>
        kt.rotary_embedding "model.layers.0.self_attn.rotary_emb" class "DeepseekV3YarnRotaryEmbedding" dim 2 theta 10000.0 yarn <factor = 40.0, original_max_position_embeddings = 4096, log_multiplier = 0.1>
      }
      kt.moe "model.layers.0.mlp" class "DeepseekV3MoE" {
        // expected-error @+1 {{model.layers.0.mlp.gate: scoring_func differs from the model's}}
        kt.moe_gate "model.layers.0.mlp.gate" class "MoEGate" scoring_func softmax top_k 2 norm_topk_prob true routed_scaling_factor 2.5 n_group 2 topk_group 1 weight <"blk.0.ffn_gate_inp.weight", F32, [8, 4]> e_score_correction_bias <"blk.0.exp_probs_b.bias", F32, [4]>
        kt.experts "model.layers.0.mlp.experts" class "torch.nn.ModuleList" gate_proj <"blk.0.ffn_gate_exps.weight", Q4_K, [8, 4, 4]> up_proj <"blk.0.ffn_up_exps.weight", Q4_K, [8, 4, 4]> down_proj <"blk.0.ffn_down_exps.weight", Q6_K, [4, 8, 4]>
        kt.mlp "model.layers.0.mlp.shared_experts" class "DeepseekV3MLP" {
          kt.linear "model.layers.0.mlp.shared_experts.gate_proj" class "torch.nn.Linear" weight <"blk.0.ffn_gate_shexp.weight", F32, [8, 4]>
          kt.linear "model.layers.0.mlp.shared_experts.up_proj" class "torch.nn.Linear" weight <"blk.0.ffn_up_shexp.weight", F32, [8, 4]>
          kt.linear "model.layers.0.mlp.shared_experts.down_proj" class "torch.nn.Linear" weight <"blk.0.ffn_down_shexp.weight", F32, [4, 8]>
        }
      }
      kt.rms_norm "model.layers.0.input_layernorm" class "DeepseekV3RMSNorm" eps 1.0e-06 weight <"blk.0.attn_norm.weight", F32, [8]>
      kt.rms_norm "model.layers.0.post_attention_layernorm" class "DeepseekV3RMSNorm" eps 1.0e-06 weight <"blk.0.ffn_norm.weight", F32, [8]>
    }
    kt.rms_norm "model.norm" class "DeepseekV3RMSNorm" eps 1.0e-06 weight <"output_norm.weight", F32, [8]>
  }
  kt.lm_head "lm_head" class "torch.nn.Linear" weight <"output.weight", F32, [8, 10]>
}

// -----

kt.model "" class "DeepseekV3ForCausalLM" arch "deepseek2" hparams <vocab_size = 10, hidden_size = 8, num_hidden_layers = 1, num_attention_heads = 2, num_key_value_heads = 2, rms_norm_eps = 1.0e-06, rope_theta = 10000.0, rope_scaling = <factor = 40.0, original_max_position_embeddings = 4096, log_multiplier = 0.1>, q_lora_rank = 6, kv_lora_rank = 4, qk_nope_head_dim = 2, qk_rope_head_dim = 2, v_head_dim = 3, n_routed_experts = 4, num_experts_per_tok = 2, moe_intermediate_size = 4, n_shared_experts = 1, norm_topk_prob = true, routed_scaling_factor = 2.5, scoring_func = sigmoid, n_group = 2, topk_group = 1> {
  kt.base_model "model" class "DeepseekV3Model" {
    kt.embedding "model.embed_tokens" class "torch.nn.Embedding" weight <"token_embd.weight", F32, [8, 10]>
    kt.decoder_layer "model.layers.0" class "DeepseekV3DecoderLayer" {
      kt.mla_attention "model.layers.0.self_attn" class "DeepseekV3Attention" {
        kt.linear "model.layers.0.self_attn.q_a_proj" class "torch.nn.Linear" weight <"blk.0.attn_q_a.weight", F32, [8, 6]>
        kt.rms_norm "model.layers.0.self_attn.q_a_layernorm" class "DeepseekV3RMSNorm" eps 1.0e-06 weight <"blk.0.attn_q_a_norm.weight", F32, [6]>
        kt.linear "model.layers.0.self_attn.q_b_proj" class "torch.nn.Linear" weight <"blk.0.attn_q_b.weight", F32, [6, 8]>
        kt.linear "model.layers.0.self_attn.kv_a_proj_with_mqa" class "torch.nn.Linear" weight <"blk.0.attn_kv_a_mqa.weight", F32, [8, 6]>
        kt.rms_norm "model.layers.0.self_attn.kv_a_layernorm" class "DeepseekV3RMSNorm" eps 1.0e-06 weight <"blk.0.attn_kv_a_norm.weight", F32, [4]>
        kt.linear "model.layers.0.self_attn.kv_b_proj" class "torch.nn.Linear" weight <"blk.0.attn_kv_b.weight", F32, [4, 10]>
        kt.linear "model.layers.0.self_attn.o_proj" class "torch.nn.Linear" weight <"blk.0.attn_output.weight", F32, [6, 8]>
        kt.rotary_embedding "model.layers.0.self_attn.rotary_emb" class "DeepseekV3YarnRotaryEmbedding" dim 2 theta 10000.0 yarn <factor = 40.0, original_max_position_embeddings = 4096, log_multiplier = 0.1>
      }
      kt.moe "model.layers.0.mlp" class "DeepseekV3MoE" {
        // expected-error @+1 {{model.layers.0.mlp.gate: routed_scaling_factor differs from the model's}}
        kt.moe_gate "model.layers.0.mlp.gate" class "MoEGate" scoring_func sigmoid top_k 2 norm_topk_prob true routed_scaling_factor 1.0 n_group 2 topk_group 1 weight <"blk.0.ffn_gate_inp.weight", F32, [8, 4]> e_score_correction_bias <"blk.0.exp_probs_b.bias", F32, [4]>
        kt.experts "model.layers.0.mlp.experts" class "torch.nn.ModuleList" gate_proj <"blk.0.ffn_gate_exps.weight", Q4_K, [8, 4, 4]> up_proj <"blk.0.ffn_up_exps.weight", Q4_K, [8, 4, 4]> down_proj <"blk.0.ffn_down_exps.weight", Q6_K, [4, 8, 4]>
        kt.mlp "model.layers.0.mlp.shared_experts" class "DeepseekV3MLP" {
          kt.linear "model.layers.0.mlp.shared_experts.gate_proj" class "torch.nn.Linear" weight <"blk.0.ffn_gate_shexp.weight", F32, [8, 4]>
          kt.linear "model.layers.0.mlp.shared_experts.up_proj" class "torch.nn.Linear" weight <"blk.0.ffn_up_shexp.weight", F32, [8, 4]>
          kt.linear "model.layers.0.mlp.shared_experts.down_proj" class "torch.nn.Linear" weight <"blk.0.ffn_down_shexp.weight", F32, [4, 8]>
        }
      }
      kt.rms_norm "model.layers.0.input_layernorm" class "DeepseekV3RMSNorm" eps 1.0e-06 weight <"blk.0.attn_norm.weight", F32, [8]>
      kt.rms_norm "model.layers.0.post_attention_layernorm" class "DeepseekV3RMSNorm" eps 1.0e-06 weight <"blk.0.ffn_norm.weight", F32, [8]>
    }
    kt.rms_norm "model.norm" class "DeepseekV3RMSNorm" eps 1.0e-06 weight <"output_norm.weight", F32, [8]>
  }
  kt.lm_head "lm_head" class "torch.nn.Linear" weight <"output.weight", F32, [8, 10]>
}

// -----

kt.model "" class "DeepseekV3ForCausalLM" arch "deepseek2" hparams <vocab_size = 10, hidden_size = 8, num_hidden_layers = 1, num_attention_heads = 2, num_key_value_heads = 2, rms_norm_eps = 1.0e-06, rope_theta = 10000.0, rope_scaling = <factor = 40.0, original_max_position_embeddings = 4096, log_multiplier = 0.1>, q_lora_rank = 6, kv_lora_rank = 4, qk_nope_head_dim = 2, qk_rope_head_dim = 2, v_head_dim = 3, n_routed_experts = 4, num_experts_per_tok = 2, moe_intermediate_size = 4, n_shared_experts = 1, norm_topk_prob = true, routed_scaling_factor = 2.5, scoring_func = sigmoid, n_group = 2, topk_group = 1> {
  kt.base_model "model" class "DeepseekV3Model" {
    kt.embedding "model.embed_tokens" class "torch.nn.Embedding" weight <"token_embd.weight", F32, [8, 10]>
    kt.decoder_layer "model.layers.0" class "DeepseekV3DecoderLayer" {
      kt.mla_attention "model.layers.0.self_attn" class "DeepseekV3Attention" {
        kt.linear "model.layers.0.self_attn.q_a_proj" class "torch.nn.Linear" weight <"blk.0.attn_q_a.weight", F32, [8, 6]>
        kt.rms_norm "model.layers.0.self_attn.q_a_layernorm" class "DeepseekV3RMSNorm" eps 1.0e-06 weight <"blk.0.attn_q_a_norm.weight", F32, [6]>
        kt.linear "model.layers.0.self_attn.q_b_proj" class "torch.nn.Linear" weight <"blk.0.attn_q_b.weight", F32, [6, 8]>
        kt.linear "model.layers.0.self_attn.kv_a_proj_with_mqa" class "torch.nn.Linear" weight <"blk.0.attn_kv_a_mqa.weight", F32, [8, 6]>
        kt.rms_norm "model.layers.0.self_attn.kv_a_layernorm" class "DeepseekV3RMSNorm" eps 1.0e-06 weight <"blk.0.attn_kv_a_norm.weight", F32, [4]>
        kt.linear "model.layers.0.self_attn.kv_b_proj" class "torch.nn.Linear" weight <"blk.0.attn_kv_b.weight", F32, [4, 10]>
        kt.linear "model.layers.0.self_attn.o_proj" class "torch.nn.Linear" weight <"blk.0.attn_output.weight", F32, [6, 8]>
        kt.rotary_embedding "model.layers.0.self_attn.rotary_emb" class "DeepseekV3YarnRotaryEmbedding" dim 2 theta 10000.0 yarn <factor = 40.0, original_max_position_embeddings = 4096, log_multiplier = 0.1>
      }
      kt.moe "model.layers.0.mlp" class "DeepseekV3MoE" {
        // expected-error @+1 {{model.layers.0.mlp.gate: n_group differs from the model's}}
        kt.moe_gate "model.layers.0.mlp.gate" class "MoEGate" scoring_func sigmoid top_k 2 norm_topk_prob true routed_scaling_factor 2.5 weight <"blk.0.ffn_gate_inp.weight", F32, [8, 4]> e_score_correction_bias <"blk.0.exp_probs_b.bias", F32, [4]>
        kt.experts "model.layers.0.mlp.experts" class "torch.nn.ModuleList" gate_proj <"blk.0.ffn_gate_exps.weight", Q4_K, [8, 4, 4]> up_proj <"blk.0.ffn_up_exps.weight", Q4_K, [8, 4, 4]> down_proj <"blk.0.ffn_down_exps.weight", Q6_K, [4, 8, 4]>
        kt.mlp "model.layers.0.mlp.shared_experts" class "DeepseekV3MLP" {
          kt.linear "model.layers.0.mlp.shared_experts.gate_proj" class "torch.nn.Linear" weight <"blk.0.ffn_gate_shexp.weight", F32, [8, 4]>
          kt.linear "model.layers.0.mlp.shared_experts.up_proj" class "torch.nn.Linear" weight <"blk.0.ffn_up_shexp.weight", F32, [8, 4]>
          kt.linear "model.layers.0.mlp.shared_experts.down_proj" class "torch.nn.Linear" weight <"blk.0.ffn_down_shexp.weight", F32, [4, 8]>
        }
      }
      kt.rms_norm "model.layers.0.input_layernorm" class "DeepseekV3RMSNorm" eps 1.0e-06 weight <"blk.0.attn_norm.weight", F32, [8]>
      kt.rms_norm "model.layers.0.post_attention_layernorm" class "DeepseekV3RMSNorm" eps 1.0e-06 weight <"blk.0.ffn_norm.weight", F32, [8]>
    }
    kt.rms_norm "model.norm" class "DeepseekV3RMSNorm" eps 1.0e-06 weight <"output_norm.weight", F32, [8]>
  }
  kt.lm_head "lm_head" class "torch.nn.Linear" weight <"output.weight", F32, [8, 10]>
}

// -----

kt.model "" class "DeepseekV3ForCausalLM" arch "deepseek2" hparams <vocab_size = 10, hidden_size = 8, num_hidden_layers = 1, num_attention_heads = 2, num_key_value_heads = 2, rms_norm_eps = 1.0e-06, rope_theta = 10000.0, rope_scaling = <factor = 40.0, original_max_position_embeddings = 4096, log_multiplier = 0.1>, q_lora_rank = 6, kv_lora_rank = 4, qk_nope_head_dim = 2, qk_rope_head_dim = 2, v_head_dim = 3, n_routed_experts = 4, num_experts_per_tok = 2, moe_intermediate_size = 4, n_shared_experts = 1, norm_topk_prob = true, routed_scaling_factor = 2.5, scoring_func = sigmoid, n_group = 2, topk_group = 1> {
  kt.base_model "model" class "DeepseekV3Model" {
    kt.embedding "model.embed_tokens" class "torch.nn.Embedding" weight <"token_embd.weight", F32, [8, 10]>
    kt.decoder_layer "model.layers.0" class "DeepseekV3DecoderLayer" {
      kt.mla_attention "model.layers.0.self_attn" class "DeepseekV3Attention" {
        kt.linear "model.layers.0.self_attn.q_a_proj" class "torch.nn.Linear" weight <"blk.0.attn_q_a.weight", F32, [8, 6]>
        kt.rms_norm "model.layers.0.self_attn.q_a_layernorm" class "DeepseekV3RMSNorm" eps 1.0e-06 weight <"blk.0.attn_q_a_norm.weight", F32, [6]>
        kt.linear "model.layers.0.self_attn.q_b_proj" class "torch.nn.Linear" weight <"blk.0.attn_q_b.weight", F32, [6, 8]>
        kt.linear "model.layers.0.self_attn.kv_a_proj_with_mqa" class "torch.nn.Linear" weight <"blk.0.attn_kv_a_mqa.weight", F32, [8, 6]>
        kt.rms_norm "model.layers.0.self_attn.kv_a_layernorm" class "DeepseekV3RMSNorm" eps 1.0e-06 weight <"blk.0.attn_kv_a_norm.weight", F32, [4]>
        kt.linear "model.layers.0.self_attn.kv_b_proj" class "torch.nn.Linear" weight <"blk.0.attn_kv_b.weight", F32, [4, 10]>
        kt.linear "model.layers.0.self_attn.o_proj" class "torch.nn.Linear" weight <"blk.0.attn_output.weight", F32, [6, 8]>
        kt.rotary_embedding "model.layers.0.self_attn.rotary_emb" class "DeepseekV3YarnRotaryEmbedding" dim 2 theta 10000.0 yarn <factor = 40.0, original_max_position_embeddings = 4096, log_multiplier = 0.1>
      }
      kt.moe "model.layers.0.mlp" class "DeepseekV3MoE" {
        // expected-error @+1 {{model.layers.0.mlp.gate: e_score_correction_bias 'blk.0.exp_probs_b.bias' has shape [8], expected [4]}}
        kt.moe_gate "model.layers.0.mlp.gate" class "MoEGate" scoring_func sigmoid top_k 2 norm_topk_prob true routed_scaling_factor 2.5 n_group 2 topk_group 1 weight <"blk.0.ffn_gate_inp.weight", F32, [8, 4]> e_score_correction_bias <"blk.0.exp_probs_b.bias", F32, [8]>
        kt.experts "model.layers.0.mlp.experts" class "torch.nn.ModuleList" gate_proj <"blk.0.ffn_gate_exps.weight", Q4_K, [8, 4, 4]> up_proj <"blk.0.ffn_up_exps.weight", Q4_K, [8, 4, 4]> down_proj <"blk.0.ffn_down_exps.weight", Q6_K, [4, 8, 4]>
        kt.mlp "model.layers.0.mlp.shared_experts" class "DeepseekV3MLP" {
          kt.linear "model.layers.0.mlp.shared_experts.gate_proj" class "torch.nn.Linear" weight <"blk.0.ffn_gate_shexp.weight", F32, [8, 4]>
          kt.linear "model.layers.0.mlp.shared_experts.up_proj" class "torch.nn.Linear" weight <"blk.0.ffn_up_shexp.weight", F32, [8, 4]>
          kt.linear "model.layers.0.mlp.shared_experts.down_proj" class "torch.nn.Linear" weight <"blk.0.ffn_down_shexp.weight", F32, [4, 8]>
        }
      }
      kt.rms_norm "model.layers.0.input_layernorm" class "DeepseekV3RMSNorm" eps 1.0e-06 weight <"blk.0.attn_norm.weight", F32, [8]>
      kt.rms_norm "model.layers.0.post_attention_layernorm" class "DeepseekV3RMSNorm" eps 1.0e-06 weight <"blk.0.ffn_norm.weight", F32, [8]>
    }
    kt.rms_norm "model.norm" class "DeepseekV3RMSNorm" eps 1.0e-06 weight <"output_norm.weight", F32, [8]>
  }
  kt.lm_head "lm_head" class "torch.nn.Linear" weight <"output.weight", F32, [8, 10]>
}

// -----

kt.model "" class "DeepseekV3ForCausalLM" arch "deepseek2" hparams <vocab_size = 10, hidden_size = 8, num_hidden_layers = 1, num_attention_heads = 2, num_key_value_heads = 2, rms_norm_eps = 1.0e-06, rope_theta = 10000.0, rope_scaling = <factor = 40.0, original_max_position_embeddings = 4096, log_multiplier = 0.1>, q_lora_rank = 6, kv_lora_rank = 4, qk_nope_head_dim = 2, qk_rope_head_dim = 2, v_head_dim = 3, n_routed_experts = 4, num_experts_per_tok = 2, moe_intermediate_size = 4, n_shared_experts = 1, norm_topk_prob = true, routed_scaling_factor = 2.5, scoring_func = sigmoid, n_group = 2, topk_group = 1> {
  kt.base_model "model" class "DeepseekV3Model" {
    kt.embedding "model.embed_tokens" class "torch.nn.Embedding" weight <"token_embd.weight", F32, [8, 10]>
    kt.decoder_layer "model.layers.0" class "DeepseekV3DecoderLayer" {
      kt.mla_attention "model.layers.0.self_attn" class "DeepseekV3Attention" {
        kt.linear "model.layers.0.self_attn.q_a_proj" class "torch.nn.Linear" weight <"blk.0.attn_q_a.weight", F32, [8, 6]>
        kt.rms_norm "model.layers.0.self_attn.q_a_layernorm" class "DeepseekV3RMSNorm" eps 1.0e-06 weight <"blk.0.attn_q_a_norm.weight", F32, [6]>
        kt.linear "model.layers.0.self_attn.q_b_proj" class "torch.nn.Linear" weight <"blk.0.attn_q_b.weight", F32, [6, 8]>
        kt.linear "model.layers.0.self_attn.kv_a_proj_with_mqa" class "torch.nn.Linear" weight <"blk.0.attn_kv_a_mqa.weight", F32, [8, 6]>
        kt.rms_norm "model.layers.0.self_attn.kv_a_layernorm" class "DeepseekV3RMSNorm" eps 1.0e-06 weight <"blk.0.attn_kv_a_norm.weight", F32, [4]>
        kt.linear "model.layers.0.self_attn.kv_b_proj" class "torch.nn.Linear" weight <"blk.0.attn_kv_b.weight", F32, [4, 10]>
        kt.linear "model.layers.0.self_attn.o_proj" class "torch.nn.Linear" weight <"blk.0.attn_output.weight", F32, [6, 8]>
        kt.rotary_embedding "model.layers.0.self_attn.rotary_emb" class "DeepseekV3YarnRotaryEmbedding" dim 2 theta 10000.0 yarn <factor = 40.0, original_max_position_embeddings = 4096, log_multiplier = 0.1>
      }
      kt.moe "model.layers.0.mlp" class "DeepseekV3MoE" {
        kt.moe_gate "model.layers.0.mlp.gate" class "MoEGate" scoring_func sigmoid top_k 2 norm_topk_prob true routed_scaling_factor 2.5 n_group 2 topk_group 1 weight <"blk.0.ffn_gate_inp.weight", F32, [8, 4]> e_score_correction_bias <"blk.0.exp_probs_b.bias", F32, [4]>
        // expected-error @+1 {{model.layers.0.mlp.experts: gate/up/down shapes [8, 4, 4], [8, 4, 4], [8, 4, 4] do not fit together}}
        kt.experts "model.layers.0.mlp.experts" class "torch.nn.ModuleList" gate_proj <"blk.0.ffn_gate_exps.weight", Q4_K, [8, 4, 4]> up_proj <"blk.0.ffn_up_exps.weight", Q4_K, [8, 4, 4]> down_proj <"blk.0.ffn_down_exps.weight", Q6_K, [8, 4, 4]>
        kt.mlp "model.layers.0.mlp.shared_experts" class "DeepseekV3MLP" {
          kt.linear "model.layers.0.mlp.shared_experts.gate_proj" class "torch.nn.Linear" weight <"blk.0.ffn_gate_shexp.weight", F32, [8, 4]>
          kt.linear "model.layers.0.mlp.shared_experts.up_proj" class "torch.nn.Linear" weight <"blk.0.ffn_up_shexp.weight", F32, [8, 4]>
          kt.linear "model.layers.0.mlp.shared_experts.down_proj" class "torch.nn.Linear" weight <"blk.0.ffn_down_shexp.weight", F32, [4, 8]>
        }
      }
      kt.rms_norm "model.layers.0.input_layernorm" class "DeepseekV3RMSNorm" eps 1.0e-06 weight <"blk.0.attn_norm.weight", F32, [8]>
      kt.rms_norm "model.layers.0.post_attention_layernorm" class "DeepseekV3RMSNorm" eps 1.0e-06 weight <"blk.0.ffn_norm.weight", F32, [8]>
    }
    kt.rms_norm "model.norm" class "DeepseekV3RMSNorm" eps 1.0e-06 weight <"output_norm.weight", F32, [8]>
  }
  kt.lm_head "lm_head" class "torch.nn.Linear" weight <"output.weight", F32, [8, 10]>
}

// -----

kt.model "" class "DeepseekV3ForCausalLM" arch "deepseek2" hparams <vocab_size = 10, hidden_size = 8, num_hidden_layers = 1, num_attention_heads = 2, num_key_value_heads = 2, rms_norm_eps = 1.0e-06, rope_theta = 10000.0, rope_scaling = <factor = 40.0, original_max_position_embeddings = 4096, log_multiplier = 0.1>, q_lora_rank = 6, kv_lora_rank = 4, qk_nope_head_dim = 2, qk_rope_head_dim = 2, v_head_dim = 3, n_routed_experts = 4, num_experts_per_tok = 2, moe_intermediate_size = 4, n_shared_experts = 1, norm_topk_prob = true, routed_scaling_factor = 2.5, scoring_func = sigmoid, n_group = 2, topk_group = 1> {
  kt.base_model "model" class "DeepseekV3Model" {
    kt.embedding "model.embed_tokens" class "torch.nn.Embedding" weight <"token_embd.weight", F32, [8, 10]>
    kt.decoder_layer "model.layers.0" class "DeepseekV3DecoderLayer" {
      kt.mla_attention "model.layers.0.self_attn" class "DeepseekV3Attention" {
        kt.linear "model.layers.0.self_attn.q_a_proj" class "torch.nn.Linear" weight <"blk.0.attn_q_a.weight", F32, [8, 6]>
        kt.rms_norm "model.layers.0.self_attn.q_a_layernorm" class "DeepseekV3RMSNorm" eps 1.0e-06 weight <"blk.0.attn_q_a_norm.weight", F32, [6]>
        kt.linear "model.layers.0.self_attn.q_b_proj" class "torch.nn.Linear" weight <"blk.0.attn_q_b.weight", F32, [6, 8]>
        kt.linear "model.layers.0.self_attn.kv_a_proj_with_mqa" class "torch.nn.Linear" weight <"blk.0.attn_kv_a_mqa.weight", F32, [8, 6]>
        kt.rms_norm "model.layers.0.self_attn.kv_a_layernorm" class "DeepseekV3RMSNorm" eps 1.0e-06 weight <"blk.0.attn_kv_a_norm.weight", F32, [4]>
        kt.linear "model.layers.0.self_attn.kv_b_proj" class "torch.nn.Linear" weight <"blk.0.attn_kv_b.weight", F32, [4, 10]>
        kt.linear "model.layers.0.self_attn.o_proj" class "torch.nn.Linear" weight <"blk.0.attn_output.weight", F32, [6, 8]>
        kt.rotary_embedding "model.layers.0.self_attn.rotary_emb" class "DeepseekV3YarnRotaryEmbedding" dim 2 theta 10000.0 yarn <factor = 40.0, original_max_position_embeddings = 4096, log_multiplier = 0.1>
      }
      kt.moe "model.layers.0.mlp" class "DeepseekV3MoE" {
        kt.moe_gate "model.layers.0.mlp.gate" class "MoEGate" scoring_func sigmoid top_k 2 norm_topk_prob true routed_scaling_factor 2.5 n_group 2 topk_group 1 weight <"blk.0.ffn_gate_inp.weight", F32, [8, 4]> e_score_correction_bias <"blk.0.exp_probs_b.bias", F32, [4]>
        // expected-error @+1 {{model.layers.0.mlp.experts: down_proj 'blk.0.ffn_down_exps.weight' has shape [8, 8, 4], expected [4, 8, 4]}}
        kt.experts "model.layers.0.mlp.experts" class "torch.nn.ModuleList" gate_proj <"blk.0.ffn_gate_exps.weight", Q4_K, [8, 8, 4]> up_proj <"blk.0.ffn_up_exps.weight", Q4_K, [8, 8, 4]> down_proj <"blk.0.ffn_down_exps.weight", Q6_K, [8, 8, 4]>
        kt.mlp "model.layers.0.mlp.shared_experts" class "DeepseekV3MLP" {
          kt.linear "model.layers.0.mlp.shared_experts.gate_proj" class "torch.nn.Linear" weight <"blk.0.ffn_gate_shexp.weight", F32, [8, 4]>
          kt.linear "model.layers.0.mlp.shared_experts.up_proj" class "torch.nn.Linear" weight <"blk.0.ffn_up_shexp.weight", F32, [8, 4]>
          kt.linear "model.layers.0.mlp.shared_experts.down_proj" class "torch.nn.Linear" weight <"blk.0.ffn_down_shexp.weight", F32, [4, 8]>
        }
      }
      kt.rms_norm "model.layers.0.input_layernorm" class "DeepseekV3RMSNorm" eps 1.0e-06 weight <"blk.0.attn_norm.weight", F32, [8]>
      kt.rms_norm "model.layers.0.post_attention_layernorm" class "DeepseekV3RMSNorm" eps 1.0e-06 weight <"blk.0.ffn_norm.weight", F32, [8]>
    }
    kt.rms_norm "model.norm" class "DeepseekV3RMSNorm" eps 1.0e-06 weight <"output_norm.weight", F32, [8]>
  }
  kt.lm_head "lm_head" class "torch.nn.Linear" weight <"output.weight", F32, [8, 10]>
}

// -----

kt.model "" class "DeepseekV3ForCausalLM" arch "deepseek2" hparams <vocab_size = 10, hidden_size = 8, num_hidden_layers = 1, num_attention_heads = 2, num_key_value_heads = 2, rms_norm_eps = 1.0e-06, rope_theta = 10000.0, rope_scaling = <factor = 40.0, original_max_position_embeddings = 4096, log_multiplier = 0.1>, q_lora_rank = 6, kv_lora_rank = 4, qk_nope_head_dim = 2, qk_rope_head_dim = 2, v_head_dim = 3, n_routed_experts = 4, num_experts_per_tok = 2, moe_intermediate_size = 4, n_shared_experts = 1, norm_topk_prob = true, routed_scaling_factor = 2.5, scoring_func = sigmoid, n_group = 2, topk_group = 1> {
  kt.base_model "model" class "DeepseekV3Model" {
    kt.embedding "model.embed_tokens" class "torch.nn.Embedding" weight <"token_embd.weight", F32, [8, 10]>
    kt.decoder_layer "model.layers.0" class "DeepseekV3DecoderLayer" {
      kt.mla_attention "model.layers.0.self_attn" class "DeepseekV3Attention" {
        kt.linear "model.layers.0.self_attn.q_a_proj" class "torch.nn.Linear" weight <"blk.0.attn_q_a.weight", F32, [8, 6]>
        kt.rms_norm "model.layers.0.self_attn.q_a_layernorm" class "DeepseekV3RMSNorm" eps 1.0e-06 weight <"blk.0.attn_q_a_norm.weight", F32, [6]>
        kt.linear "model.layers.0.self_attn.q_b_proj" class "torch.nn.Linear" weight <"blk.0.attn_q_b.weight", F32, [6, 8]>
        kt.linear "model.layers.0.self_attn.kv_a_proj_with_mqa" class "torch.nn.Linear" weight <"blk.0.attn_kv_a_mqa.weight", F32, [8, 6]>
        kt.rms_norm "model.layers.0.self_attn.kv_a_layernorm" class "DeepseekV3RMSNorm" eps 1.0e-06 weight <"blk.0.attn_kv_a_norm.weight", F32, [4]>
        kt.linear "model.layers.0.self_attn.kv_b_proj" class "torch.nn.Linear" weight <"blk.0.attn_kv_b.weight", F32, [4, 10]>
        kt.linear "model.layers.0.self_attn.o_proj" class "torch.nn.Linear" weight <"blk.0.attn_output.weight", F32, [6, 8]>
        kt.rotary_embedding "model.layers.0.self_attn.rotary_emb" class "DeepseekV3YarnRotaryEmbedding" dim 2 theta 10000.0 yarn <factor = 40.0, original_max_position_embeddings = 4096, log_multiplier = 0.1>
      }
      kt.moe "model.layers.0.mlp" class "DeepseekV3MoE" {
        kt.moe_gate "model.layers.0.mlp.gate" class "MoEGate" scoring_func sigmoid top_k 2 norm_topk_prob true routed_scaling_factor 2.5 n_group 2 topk_group 1 weight <"blk.0.ffn_gate_inp.weight", F32, [8, 4]> e_score_correction_bias <"blk.0.exp_probs_b.bias", F32, [4]>
        kt.experts "model.layers.0.mlp.experts" class "torch.nn.ModuleList" gate_proj <"blk.0.ffn_gate_exps.weight", Q4_K, [8, 4, 4]> up_proj <"blk.0.ffn_up_exps.weight", Q4_K, [8, 4, 4]> down_proj <"blk.0.ffn_down_exps.weight", Q6_K, [4, 8, 4]>
        kt.mlp "model.layers.0.mlp.shared_expert" class "DeepseekV3MLP" {
          // expected-error @+1 {{path 'model.layers.0.mlp.shared_experts.gate_proj' is not inside}}
          kt.linear "model.layers.0.mlp.shared_experts.gate_proj" class "torch.nn.Linear" weight <"blk.0.ffn_gate_shexp.weight", F32, [8, 4]>
          kt.linear "model.layers.0.mlp.shared_experts.up_proj" class "torch.nn.Linear" weight <"blk.0.ffn_up_shexp.weight", F32, [8, 4]>
          kt.linear "model.layers.0.mlp.shared_experts.down_proj" class "torch.nn.Linear" weight <"blk.0.ffn_down_shexp.weight", F32, [4, 8]>
        }
      }
      kt.rms_norm "model.layers.0.input_layernorm" class "DeepseekV3RMSNorm" eps 1.0e-06 weight <"blk.0.attn_norm.weight", F32, [8]>
      kt.rms_norm "model.layers.0.post_attention_layernorm" class "DeepseekV3RMSNorm" eps 1.0e-06 weight <"blk.0.ffn_norm.weight", F32, [8]>
    }
    kt.rms_norm "model.norm" class "DeepseekV3RMSNorm" eps 1.0e-06 weight <"output_norm.weight", F32, [8]>
  }
  kt.lm_head "lm_head" class "torch.nn.Linear" weight <"output.weight", F32, [8, 10]>
}

// -----

kt.model "" class "DeepseekV3ForCausalLM" arch "deepseek2" hparams <vocab_size = 10, hidden_size = 8, num_hidden_layers = 1, num_attention_heads = 2, num_key_value_heads = 2, rms_norm_eps = 1.0e-06, rope_theta = 10000.0, rope_scaling = <factor = 40.0, original_max_position_embeddings = 4096, log_multiplier = 0.1>, q_lora_rank = 6, kv_lora_rank = 4, qk_nope_head_dim = 2, qk_rope_head_dim = 2, v_head_dim = 3, n_routed_experts = 4, num_experts_per_tok = 2, moe_intermediate_size = 4, n_shared_experts = 1, norm_topk_prob = true, routed_scaling_factor = 2.5, scoring_func = sigmoid, n_group = 2, topk_group = 1> {
  kt.base_model "model" class "DeepseekV3Model" {
    kt.embedding "model.embed_tokens" class "torch.nn.Embedding" weight <"token_embd.weight", F32, [8, 10]>
    kt.decoder_layer "model.layers.0" class "DeepseekV3DecoderLayer" {
      kt.mla_attention "model.layers.0.self_attn" class "DeepseekV3Attention" {
        kt.linear "model.layers.0.self_attn.q_a_proj" class "torch.nn.Linear" weight <"blk.0.attn_q_a.weight", F32, [8, 6]>
        kt.rms_norm "model.layers.0.self_attn.q_a_layernorm" class "DeepseekV3RMSNorm" eps 1.0e-06 weight <"blk.0.attn_q_a_norm.weight", F32, [6]>
        // expected-error @+1 {{model.layers.0.self_attn.q_b_proj: weight 'blk.0.attn_q_b.weight' has shape [8, 8], expected [6, 8]}}
        kt.linear "model.layers.0.self_attn.q_b_proj" class "torch.nn.Linear" weight <"blk.0.attn_q_b.weight", F32, [8, 8]>
        kt.linear "model.layers.0.self_attn.kv_a_proj_with_mqa" class "torch.nn.Linear" weight <"blk.0.attn_kv_a_mqa.weight", F32, [8, 6]>
        kt.rms_norm "model.layers.0.self_attn.kv_a_layernorm" class "DeepseekV3RMSNorm" eps 1.0e-06 weight <"blk.0.attn_kv_a_norm.weight", F32, [4]>
        kt.linear "model.layers.0.self_attn.kv_b_proj" class "torch.nn.Linear" weight <"blk.0.attn_kv_b.weight", F32, [4, 10]>
        kt.linear "model.layers.0.self_attn.o_proj" class "torch.nn.Linear" weight <"blk.0.attn_output.weight", F32, [6, 8]>
        kt.rotary_embedding "model.layers.0.self_attn.rotary_emb" class "DeepseekV3YarnRotaryEmbedding" dim 2 theta 10000.0 yarn <factor = 40.0, original_max_position_embeddings = 4096, log_multiplier = 0.1>
      }
      kt.moe "model.layers.0.mlp" class "DeepseekV3MoE" {
        kt.moe_gate "model.layers.0.mlp.gate" class "MoEGate" scoring_func sigmoid top_k 2 norm_topk_prob true routed_scaling_factor 2.5 n_group 2 topk_group 1 weight <"blk.0.ffn_gate_inp.weight", F32, [8, 4]> e_score_correction_bias <"blk.0.exp_probs_b.bias", F32, [4]>
        kt.experts "model.layers.0.mlp.experts" class "torch.nn.ModuleList" gate_proj <"blk.0.ffn_gate_exps.weight", Q4_K, [8, 4, 4]> up_proj <"blk.0.ffn_up_exps.weight", Q4_K, [8, 4, 4]> down_proj <"blk.0.ffn_down_exps.weight", Q6_K, [4, 8, 4]>
        kt.mlp "model.layers.0.mlp.shared_experts" class "DeepseekV3MLP" {
          kt.linear "model.layers.0.mlp.shared_experts.gate_proj" class "torch.nn.Linear" weight <"blk.0.ffn_gate_shexp.weight", F32, [8, 4]>
          kt.linear "model.layers.0.mlp.shared_experts.up_proj" class "torch.nn.Linear" weight <"blk.0.ffn_up_shexp.weight", F32, [8, 4]>
          kt.linear "model.layers.0.mlp.shared_experts.down_proj" class "torch.nn.Linear" weight <"blk.0.ffn_down_shexp.weight", F32, [4, 8]>
        }
      }
      kt.rms_norm "model.layers.0.input_layernorm" class "DeepseekV3RMSNorm" eps 1.0e-06 weight <"blk.0.attn_norm.weight", F32, [8]>
      kt.rms_norm "model.layers.0.post_attention_layernorm" class "DeepseekV3RMSNorm" eps 1.0e-06 weight <"blk.0.ffn_norm.weight", F32, [8]>
    }
    kt.rms_norm "model.norm" class "DeepseekV3RMSNorm" eps 1.0e-06 weight <"output_norm.weight", F32, [8]>
  }
  kt.lm_head "lm_head" class "torch.nn.Linear" weight <"output.weight", F32, [8, 10]>
}

// -----

kt.model "" class "DeepseekV3ForCausalLM" arch "deepseek2" hparams <vocab_size = 10, hidden_size = 8, num_hidden_layers = 1, num_attention_heads = 2, num_key_value_heads = 2, rms_norm_eps = 1.0e-06, rope_theta = 10000.0, rope_scaling = <factor = 40.0, original_max_position_embeddings = 4096, log_multiplier = 0.1>, q_lora_rank = 6, kv_lora_rank = 4, qk_nope_head_dim = 2, qk_rope_head_dim = 2, v_head_dim = 3, n_routed_experts = 4, num_experts_per_tok = 2, moe_intermediate_size = 4, n_shared_experts = 1, norm_topk_prob = true, routed_scaling_factor = 2.5, scoring_func = sigmoid, n_group = 2, topk_group = 1> {
  kt.base_model "model" class "DeepseekV3Model" {
    kt.embedding "model.embed_tokens" class "torch.nn.Embedding" weight <"token_embd.weight", F32, [8, 10]>
    kt.decoder_layer "model.layers.0" class "DeepseekV3DecoderLayer" {
      kt.mla_attention "model.layers.0.self_attn" class "DeepseekV3Attention" {
        kt.linear "model.layers.0.self_attn.q_a_proj" class "torch.nn.Linear" weight <"blk.0.attn_q_a.weight", F32, [8, 6]>
        kt.rms_norm "model.layers.0.self_attn.q_a_layernorm" class "DeepseekV3RMSNorm" eps 1.0e-06 weight <"blk.0.attn_q_a_norm.weight", F32, [6]>
        kt.linear "model.layers.0.self_attn.q_b_proj" class "torch.nn.Linear" weight <"blk.0.attn_q_b.weight", F32, [6, 8]>
        // expected-error @+1 {{model.layers.0.self_attn.kv_a_proj_with_mqa: weight 'blk.0.attn_kv_a_mqa.weight' has shape [8, 4], expected [8, 6]}}
        kt.linear "model.layers.0.self_attn.kv_a_proj_with_mqa" class "torch.nn.Linear" weight <"blk.0.attn_kv_a_mqa.weight", F32, [8, 4]>
        kt.rms_norm "model.layers.0.self_attn.kv_a_layernorm" class "DeepseekV3RMSNorm" eps 1.0e-06 weight <"blk.0.attn_kv_a_norm.weight", F32, [4]>
        kt.linear "model.layers.0.self_attn.kv_b_proj" class "torch.nn.Linear" weight <"blk.0.attn_kv_b.weight", F32, [4, 10]>
        kt.linear "model.layers.0.self_attn.o_proj" class "torch.nn.Linear" weight <"blk.0.attn_output.weight", F32, [6, 8]>
        kt.rotary_embedding "model.layers.0.self_attn.rotary_emb" class "DeepseekV3YarnRotaryEmbedding" dim 2 theta 10000.0 yarn <factor = 40.0, original_max_position_embeddings = 4096, log_multiplier = 0.1>
      }
      kt.moe "model.layers.0.mlp" class "DeepseekV3MoE" {
        kt.moe_gate "model.layers.0.mlp.gate" class "MoEGate" scoring_func sigmoid top_k 2 norm_topk_prob true routed_scaling_factor 2.5 n_group 2 topk_group 1 weight <"blk.0.ffn_gate_inp.weight", F32, [8, 4]> e_score_correction_bias <"blk.0.exp_probs_b.bias", F32, [4]>
        kt.experts "model.layers.0.mlp.experts" class "torch.nn.ModuleList" gate_proj <"blk.0.ffn_gate_exps.weight", Q4_K, [8, 4, 4]> up_proj <"blk.0.ffn_up_exps.weight", Q4_K, [8, 4, 4]> down_proj <"blk.0.ffn_down_exps.weight", Q6_K, [4, 8, 4]>
        kt.mlp "model.layers.0.mlp.shared_experts" class "DeepseekV3MLP" {
          kt.linear "model.layers.0.mlp.shared_experts.gate_proj" class "torch.nn.Linear" weight <"blk.0.ffn_gate_shexp.weight", F32, [8, 4]>
          kt.linear "model.layers.0.mlp.shared_experts.up_proj" class "torch.nn.Linear" weight <"blk.0.ffn_up_shexp.weight", F32, [8, 4]>
          kt.linear "model.layers.0.mlp.shared_experts.down_proj" class "torch.nn.Linear" weight <"blk.0.ffn_down_shexp.weight", F32, [4, 8]>
        }
      }
      kt.rms_norm "model.layers.0.input_layernorm" class "DeepseekV3RMSNorm" eps 1.0e-06 weight <"blk.0.attn_norm.weight", F32, [8]>
      kt.rms_norm "model.layers.0.post_attention_layernorm" class "DeepseekV3RMSNorm" eps 1.0e-06 weight <"blk.0.ffn_norm.weight", F32, [8]>
    }
    kt.rms_norm "model.norm" class "DeepseekV3RMSNorm" eps 1.0e-06 weight <"output_norm.weight", F32, [8]>
  }
  kt.lm_head "lm_head" class "torch.nn.Linear" weight <"output.weight", F32, [8, 10]>
}

// -----

kt.model "" class "DeepseekV3ForCausalLM" arch "deepseek2" hparams <vocab_size = 10, hidden_size = 8, num_hidden_layers = 1, num_attention_heads = 2, num_key_value_heads = 2, rms_norm_eps = 1.0e-06, rope_theta = 10000.0, rope_scaling = <factor = 40.0, original_max_position_embeddings = 4096, log_multiplier = 0.1>, q_lora_rank = 6, kv_lora_rank = 4, qk_nope_head_dim = 2, qk_rope_head_dim = 2, v_head_dim = 3, n_routed_experts = 4, num_experts_per_tok = 2, moe_intermediate_size = 4, n_shared_experts = 1, norm_topk_prob = true, routed_scaling_factor = 2.5, scoring_func = sigmoid, n_group = 2, topk_group = 1> {
  kt.base_model "model" class "DeepseekV3Model" {
    kt.embedding "model.embed_tokens" class "torch.nn.Embedding" weight <"token_embd.weight", F32, [8, 10]>
    kt.decoder_layer "model.layers.0" class "DeepseekV3DecoderLayer" {
      kt.mla_attention "model.layers.0.self_attn" class "DeepseekV3Attention" {
        kt.linear "model.layers.0.self_attn.q_a_proj" class "torch.nn.Linear" weight <"blk.0.attn_q_a.weight", F32, [8, 6]>
        kt.rms_norm "model.layers.0.self_attn.q_a_layernorm" class "DeepseekV3RMSNorm" eps 1.0e-06 weight <"blk.0.attn_q_a_norm.weight", F32, [6]>
        kt.linear "model.layers.0.self_attn.q_b_proj" class "torch.nn.Linear" weight <"blk.0.attn_q_b.weight", F32, [6, 8]>
        kt.linear "model.layers.0.self_attn.kv_a_proj_with_mqa" class "torch.nn.Linear" weight <"blk.0.attn_kv_a_mqa.weight", F32, [8, 6]>
        kt.rms_norm "model.layers.0.self_attn.kv_a_layernorm" class "DeepseekV3RMSNorm" eps 1.0e-06 weight <"blk.0.attn_kv_a_norm.weight", F32, [4]>
        kt.linear "model.layers.0.self_attn.kv_b_proj" class "torch.nn.Linear" weight <"blk.0.attn_kv_b.weight", F32, [4, 10]>
        kt.linear "model.layers.0.self_attn.o_proj" class "torch.nn.Linear" weight <"blk.0.attn_output.weight", F32, [6, 8]>
        // expected-error @+1 {{model.layers.0.self_attn.rotary_emb: yarn scaling differs from the model's rope_scaling}}
        kt.rotary_embedding "model.layers.0.self_attn.rotary_emb" class "DeepseekV3YarnRotaryEmbedding" dim 2 theta 10000.0 yarn <factor = 40.0, original_max_position_embeddings = 4096, log_multiplier = 0.2>
      }
      kt.moe "model.layers.0.mlp" class "DeepseekV3MoE" {
        kt.moe_gate "model.layers.0.mlp.gate" class "MoEGate" scoring_func sigmoid top_k 2 norm_topk_prob true routed_scaling_factor 2.5 n_group 2 topk_group 1 weight <"blk.0.ffn_gate_inp.weight", F32, [8, 4]> e_score_correction_bias <"blk.0.exp_probs_b.bias", F32, [4]>
        kt.experts "model.layers.0.mlp.experts" class "torch.nn.ModuleList" gate_proj <"blk.0.ffn_gate_exps.weight", Q4_K, [8, 4, 4]> up_proj <"blk.0.ffn_up_exps.weight", Q4_K, [8, 4, 4]> down_proj <"blk.0.ffn_down_exps.weight", Q6_K, [4, 8, 4]>
        kt.mlp "model.layers.0.mlp.shared_experts" class "DeepseekV3MLP" {
          kt.linear "model.layers.0.mlp.shared_experts.gate_proj" class "torch.nn.Linear" weight <"blk.0.ffn_gate_shexp.weight", F32, [8, 4]>
          kt.linear "model.layers.0.mlp.shared_experts.up_proj" class "torch.nn.Linear" weight <"blk.0.ffn_up_shexp.weight", F32, [8, 4]>
          kt.linear "model.layers.0.mlp.shared_experts.down_proj" class "torch.nn.Linear" weight <"blk.0.ffn_down_shexp.weight", F32, [4, 8]>
        }
      }
      kt.rms_norm "model.layers.0.input_layernorm" class "DeepseekV3RMSNorm" eps 1.0e-06 weight <"blk.0.attn_norm.weight", F32, [8]>
      kt.rms_norm "model.layers.0.post_attention_layernorm" class "DeepseekV3RMSNorm" eps 1.0e-06 weight <"blk.0.ffn_norm.weight", F32, [8]>
    }
    kt.rms_norm "model.norm" class "DeepseekV3RMSNorm" eps 1.0e-06 weight <"output_norm.weight", F32, [8]>
  }
  kt.lm_head "lm_head" class "torch.nn.Linear" weight <"output.weight", F32, [8, 10]>
}

// -----

kt.model "" class "DeepseekV3ForCausalLM" arch "deepseek2" hparams <vocab_size = 10, hidden_size = 8, num_hidden_layers = 1, num_attention_heads = 2, num_key_value_heads = 2, rms_norm_eps = 1.0e-06, rope_theta = 10000.0, rope_scaling = <factor = 40.0, original_max_position_embeddings = 4096, log_multiplier = 0.1>, q_lora_rank = 6, kv_lora_rank = 4, qk_nope_head_dim = 2, qk_rope_head_dim = 2, v_head_dim = 3, n_routed_experts = 4, num_experts_per_tok = 2, intermediate_size = 16, moe_intermediate_size = 4, n_shared_experts = 1, norm_topk_prob = true, routed_scaling_factor = 2.5, scoring_func = sigmoid, n_group = 2, topk_group = 1> {
  kt.base_model "model" class "DeepseekV3Model" {
    kt.embedding "model.embed_tokens" class "torch.nn.Embedding" weight <"token_embd.weight", F32, [8, 10]>
    kt.decoder_layer "model.layers.0" class "DeepseekV3DecoderLayer" {
      kt.mla_attention "model.layers.0.self_attn" class "DeepseekV3Attention" {
        kt.linear "model.layers.0.self_attn.q_a_proj" class "torch.nn.Linear" weight <"blk.0.attn_q_a.weight", F32, [8, 6]>
        kt.rms_norm "model.layers.0.self_attn.q_a_layernorm" class "DeepseekV3RMSNorm" eps 1.0e-06 weight <"blk.0.attn_q_a_norm.weight", F32, [6]>
        kt.linear "model.layers.0.self_attn.q_b_proj" class "torch.nn.Linear" weight <"blk.0.attn_q_b.weight", F32, [6, 8]>
        kt.linear "model.layers.0.self_attn.kv_a_proj_with_mqa" class "torch.nn.Linear" weight <"blk.0.attn_kv_a_mqa.weight", F32, [8, 6]>
        kt.rms_norm "model.layers.0.self_attn.kv_a_layernorm" class "DeepseekV3RMSNorm" eps 1.0e-06 weight <"blk.0.attn_kv_a_norm.weight", F32, [4]>
        kt.linear "model.layers.0.self_attn.kv_b_proj" class "torch.nn.Linear" weight <"blk.0.attn_kv_b.weight", F32, [4, 10]>
        kt.linear "model.layers.0.self_attn.o_proj" class "torch.nn.Linear" weight <"blk.0.attn_output.weight", F32, [6, 8]>
        kt.rotary_embedding "model.layers.0.self_attn.rotary_emb" class "DeepseekV3YarnRotaryEmbedding" dim 2 theta 10000.0 yarn <factor = 40.0, original_max_position_embeddings = 4096, log_multiplier = 0.1>
      }
      // expected-error @+1 {{model.layers.0.mlp: is a kt.mlp, expected a kt.moe}}
      kt.mlp "model.layers.0.mlp" class "DeepseekV3MLP" {
        kt.linear "model.layers.0.mlp.gate_proj" class "torch.nn.Linear" weight <"blk.0.ffn_gate.weight", F32, [8, 16]>
        kt.linear "model.layers.0.mlp.up_proj" class "torch.nn.Linear" weight <"blk.0.ffn_up.weight", F32, [8, 16]>
        kt.linear "model.layers.0.mlp.down_proj" class "torch.nn.Linear" weight <"blk.0.ffn_down.weight", F32, [16, 8]>
      }
      kt.rms_norm "model.layers.0.input_layernorm" class "DeepseekV3RMSNorm" eps 1.0e-06 weight <"blk.0.attn_norm.weight", F32, [8]>
      kt.rms_norm "model.layers.0.post_attention_layernorm" class "DeepseekV3RMSNorm" eps 1.0e-06 weight <"blk.0.ffn_norm.weight", F32, [8]>
    }
    kt.rms_norm "model.norm" class "DeepseekV3RMSNorm" eps 1.0e-06 weight <"output_norm.weight", F32, [8]>
  }
  kt.lm_head "lm_head" class "torch.nn.Linear" weight <"output.weight", F32, [8, 10]>
}

// -----

// expected-error @+1 {{lone: bias 'b' has shape [3], expected [4]}}
kt.linear "lone" class "torch.nn.Linear" weight <"w", F32, [8, 4]> bias <"b", F32, [3]>

// -----

// expected-error @+1 {{expected softmax or sigmoid, got 'relu'}}
kt.moe_gate "g" class "MoEGate" scoring_func relu top_k 2 norm_topk_prob true routed_scaling_factor 1.0 weight <"w", F32, [8, 4]>

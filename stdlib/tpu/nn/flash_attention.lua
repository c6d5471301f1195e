-- The process-wide choice of MultiHeadAttention's fused op, as Keras's
-- keras.config.enable_flash_attention and its kin: nil (the start) lets each layer decide, true
-- or false decides for every layer without a flash_attention option of its own (the layers
-- inside tpu.applications' BERT and GPT-2 included). tpu.nn exposes the three functions.
local errors = require "tpu.errors"

local M = {}
local everywhere = nil

function M.enable_flash_attention(extra)
  errors.none(1, "enable_flash_attention", extra)
  everywhere = true
end

function M.disable_flash_attention(extra)
  errors.none(1, "disable_flash_attention", extra)
  everywhere = false
end

function M.is_flash_attention_enabled(extra)
  errors.none(1, "is_flash_attention_enabled", extra)
  return everywhere
end

function M._reset() everywhere = nil end  -- tests: back to the start

return M

-- A learned position embedding (BERT, GPT-2): a [sequence_length, features] table whose first
-- L rows, broadcast over the batch, are the output for an input [batch, L, features]. As
-- keras_hub's PositionEmbedding, it returns the embeddings; add them to the tokens' yourself.
--
--   local tokens = nn.Embedding(vocab, 64)(ids)                       -- [batch, L, 64]
--   local x = nn.Add() {tokens, nn.PositionEmbedding {sequence_length = 128}(tokens)}
--   nn.PositionEmbedding {sequence_length = 512, initializer = "random_normal"}
local core = require "tpu.core"
local Module = require "tpu.nn.Module"
local util = require "tpu.nn.util"

local PositionEmbedding = Module:extend("PositionEmbedding")
PositionEmbedding.token_wise = true  -- model:generate runs it a token at a time through ctx.decode
PositionEmbedding.takes_one_tensor = true  -- a list of tensors given to it is an error naming it

local options = util.options {"sequence_length", "initializer"}
local who = "PositionEmbedding"

function PositionEmbedding:__init(opts)
  opts = opts or {}
  util.check_options(self, opts, options)
  self:init_common(opts)
  self.sequence_length = util.check_integer(who, "sequence_length", opts.sequence_length)
  self.initializer = util.initializer(opts, who, "initializer", "glorot_uniform")
end

function PositionEmbedding:_check_shape(shape)
  if #shape < 2 or shape[#shape - 1] > self.sequence_length then
    util.fail("PositionEmbedding '%s' expects input [batch, length, features] with length at most "
      .. "sequence_length = %d, got %s", self.name, self.sequence_length, util.shape_text(shape))
  end
end

function PositionEmbedding:build(input_shape)
  self:_check_shape(input_shape)
  self:add_weight {name = "embeddings", shape = {self.sequence_length, input_shape[#input_shape]},
                   initializer = self.initializer}
end

function PositionEmbedding:call(x, ctx)
  local shape = x.shape
  self:_check_shape(shape)
  -- model:generate's decode step: the row of the current position (tpu/nn/generate.lua)
  if ctx and ctx.decode and ctx.decode.step then return ctx.decode:positions(self, x) end
  local n = #shape
  local rows = self.embeddings
  if shape[n - 1] < self.sequence_length then rows = rows:slice {{1, shape[n - 1]}} end
  if rows.shape[2] ~= shape[n] then
    util.fail("PositionEmbedding '%s' was built for %d features, got %s", self.name,
      rows.shape[2], util.describe(x))
  end
  local dtype = util.output_dtype(self.dtype_policy)
  -- broadcast to the input's shape, as Keras's layer does
  return core.zeros(shape, {dtype = dtype}) + util.cast_float(rows, dtype)
end

function PositionEmbedding:compute_output_shape(input_shape)
  return util.copy(input_shape)
end

function PositionEmbedding:repr()
  local d = self.built and tostring(self.embeddings.shape[2]) or "?"
  return string.format("nn.PositionEmbedding(%d x %s)", self.sequence_length, d)
end

return PositionEmbedding

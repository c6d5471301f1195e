-- Turns integer ids (0-based, any integer dtype) into vectors: [batch, len] -> [batch, len, dim].
--
--   nn.Embedding(10000, 64)
--   nn.Embedding(256, 32, {embeddings_initializer = "glorot_uniform",
--                          embeddings_regularizer = "l2"})
local Module = require "tpu.nn.Module"
local util = require "tpu.nn.util"

local Embedding = Module:extend("Embedding")
Embedding.token_wise = true  -- each position on its own: model:generate may run it a token at a time
Embedding.takes_one_tensor = true  -- a list of tensors given to it is an error naming it

local options = util.options {"embeddings_initializer", "embeddings_regularizer"}

function Embedding:__init(input_dim, output_dim, opts)
  opts = opts or {}
  self.input_dim = util.check_integer("Embedding", "input_dim (the vocabulary size)", input_dim)
  self.output_dim = util.check_integer("Embedding", "output_dim", output_dim)
  util.check_options(self, opts, options)
  self:init_common(opts)
  self.embeddings_initializer = util.initializer(opts, "Embedding", "embeddings_initializer",
                                                 "random_uniform")
  self.embeddings_regularizer = util.regularizer(opts, "Embedding", "embeddings_regularizer")
end

function Embedding:build(_input_shape)
  self:add_weight {name = "embeddings", shape = {self.input_dim, self.output_dim},
                   initializer = self.embeddings_initializer, regularizer = self.embeddings_regularizer}
end

local integer = {i32 = true, u8 = true}

function Embedding:call(ids, _ctx)
  if not integer[ids.dtype] then
    util.fail("Embedding '%s' expects integer ids (i32 or u8), got %s; cast them with x:cast(\"i32\")",
      self.name, util.describe(ids))
  end
  if ids.dtype ~= "i32" then ids = ids:cast("i32") end
  -- a lookup has no arithmetic: the rows are gathered, then given the layer's output dtype
  return util.cast_float(self.embeddings:take(ids, 1), util.output_dtype(self.dtype_policy))
end

function Embedding:compute_output_shape(input_shape)
  local out = util.copy(input_shape)
  out[#out + 1] = self.output_dim
  return out
end

function Embedding:repr()
  return string.format("nn.Embedding(%d -> %d)", self.input_dim, self.output_dim)
end

return Embedding

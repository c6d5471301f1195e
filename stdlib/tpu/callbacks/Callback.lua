-- The base class of callbacks: every hook does nothing (tpu/callbacks/init.lua lists them).
local class = require "tpu.class"

local Callback = class("Callback")

function Callback:__init() end
function Callback:set_model(model) self.model = model end
function Callback:set_params(params) self.params = params end
function Callback:on_train_begin(_logs) end
function Callback:on_train_end(_logs) end
function Callback:on_epoch_begin(_epoch, _logs) end
function Callback:on_epoch_end(_epoch, _logs) end
function Callback:on_batch_end(_batch, _logs) end
function Callback:on_train_batch_end(batch, logs) return self:on_batch_end(batch, logs) end

function Callback:__tostring() return "callbacks." .. self.__name end

return Callback

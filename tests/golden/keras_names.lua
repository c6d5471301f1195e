-- The Keras names of DESIGN section 3, each tried as a Keras user writes it: the line shows
-- what it became in tputrain's own terms. Giving both names is an error.
local tpu = require "tpu"
local nn, optim, callbacks, losses = tpu.nn, tpu.optim, tpu.callbacks, tpu.losses

local function row(keras, ours) print(string.format("%-52s -> %s", keras, ours)) end

local adam = optim.Adam {learning_rate = 0.01, beta_1 = 0.8, beta_2 = 0.99}
row("optim.Adam{learning_rate=0.01, beta_1=0.8, beta_2=0.99}", string.format("lr=%g beta1=%g beta2=%g", adam.lr, adam.beta1, adam.beta2))
row("optim.SGD{learning_rate=0.5}", "lr=" .. optim.SGD {learning_rate = 0.5}.lr)
row("callbacks.early_stopping{restore_best_weights=true}", "restore_best=" .. tostring(callbacks.early_stopping {restore_best_weights = true}.restore_best))
row("callbacks.checkpoint{filepath='m.safetensors'}", "path=" .. callbacks.checkpoint {filepath = "m.safetensors"}.path)
row("callbacks.csv_logger('log.csv')", "path=" .. callbacks.csv_logger("log.csv").path)
row("callbacks.lr_scheduler{schedule=fn}", "fn set: " .. tostring(callbacks.lr_scheduler {schedule = function(_, lr) return lr end}.fn ~= nil))
local loss = losses.SparseCategoricalCrossentropy {from_logits = true}
local logits, labels = tpu.tensor {{2.0, 0.0}}, tpu.tensor({0}, {dtype = "i32"})
row("losses.SparseCategoricalCrossentropy{from_logits=true}", string.format("loss %.4f", loss(labels, logits):item()))

local x = tpu.tensor {{1, 0}, {0, 1}, {1, 1}, {0, 0}}
local y = tpu.tensor {{1}, {0}, {1}, {0}}
tpu.nn.initializers.set_seed(1)
local model = nn.Sequential {nn.Dense(1, {name = "out"})}
model:compile {optimizer = optim.SGD {learning_rate = 0.1}, loss = "mean_squared_error"}
local h = model:fit(x, y, {epochs = 2, batch_size = 2, validation_split = 0.5, verbose = 0})
row("model:fit(x, y, {batch_size=2, validation_split=0.5})", string.format("%d epochs, val_loss %.4f", #h.history.loss, h.history.val_loss[2]))
local h2 = model:fit(x, y, {epochs = 3, initial_epoch = 2, batch_size = 2, verbose = 0})
row("model:fit(x, y, {epochs=3, initial_epoch=2})", "ran epoch " .. h2.epoch[1])
row("model:evaluate(x, y)", string.format("loss %.4f", model:evaluate(x, y, {verbose = 0}).loss))
row("model.layers[1].name", model.layers[1].name)
local total, trainable, frozen = model:count_params()
row("model:count_params()", string.format("%d total, %d trainable, %d non-trainable", total, trainable, frozen))
local files = dofile("../lua/files.lua")  -- removes the directory at exit, also after an error
local dir = files.tmpdir()
os.execute("mkdir -p " .. dir .. "/cat")
tpu.image.write_png(dir .. "/cat/1.png", tpu.zeros({6, 6, 3}, {dtype = "u8"}))
local images = tpu.data.image_folder(dir, {color_mode = "grayscale", image_size = {4, 4}, verbose = false})
row("data.image_folder(dir, {color_mode='grayscale'})", "elements " .. tostring(images:element_spec()))
os.execute("rm -rf " .. dir)

local Scale = nn.Module:extend("Scale")
function Scale:build(shape) self.gamma = self:add_weight {shape = {shape[#shape]}, initializer = "ones"} end
function Scale:call(v) return v * self.gamma end
local scale = Scale()
scale(tpu.ones {1, 3})
row("self:add_weight{shape=, initializer=} (no name)", "weight '" .. scale._weights[1].name .. "' " .. tostring(scale.gamma))

local function try(f)
  local ok, err = pcall(f)
  print(ok and "no error" or err)
end
try(function() optim.Adam {lr = 0.1, learning_rate = 0.2} end)
try(function() callbacks.checkpoint {path = "a", filepath = "b"} end)
try(function() model:fit({x, y}, {verbose = 0}, 3) end)

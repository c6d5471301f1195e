-- Smoke test of scripts/nasnet_cifar_tpu.lua: the seed's model (NASNet-Large at 32x32 without
-- the top, GlobalAveragePooling2D and Dense(100)) for one step of a batch of 2 on one core.
arg = {[0] = "../../scripts/nasnet_cifar_tpu.lua", "1", "2", "1"}
dofile(arg[0])

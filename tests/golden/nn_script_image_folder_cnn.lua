-- Smoke test of scripts/image_folder_cnn.lua (--smoke: a folder of 100 PNG and JPEG images made
-- from Fashion-MNIST, three augmented training batches, one test batch).
arg = {[0] = "../../scripts/image_folder_cnn.lua", "--smoke"}
dofile(arg[0])

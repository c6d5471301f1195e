-- tpu.applications: ready-made models (Keras's names and arguments), each an nn.Model built
-- from public layers.
return {
  BertBase = require "tpu.applications.bert",
  GPT2Small = require "tpu.applications.gpt2",
}

-- Language identification over Debian's fortune cookies: English (fortunes), German
-- (fortunes-de), Italian (fortunes-it), Spanish (fortunes-es), Brazilian Portuguese
-- (fortunes-br). A small transformer encoder reads a cookie's characters, cut to the first
-- MAX_LEN = 64 (enough to tell the language; attention costs the length squared), and predicts
-- the language. padded_batch pads each batch to its longest cookie rounded up to 16, so the
-- steps compile at most ceil(64 / 16) = 4 signatures (without it: one per length).
--
--   tputrain scripts/fortunes_language.lua [N]        -- N cookies per language (default 1000)
--   tputrain --profile scripts/fortunes_language.lua  -- counts the compiled signatures
local tpu = require "tpu"
local nn, optim, data = tpu.nn, tpu.optim, tpu.data
local per_language = math.tointeger(tonumber(arg and arg[1] or 1000))
assert(per_language and per_language >= 5, "usage: fortunes_language.lua [cookies per language >= 5]")
local MAX_LEN, MULTIPLE, EPOCHS = 64, 16, 3

local F = "/usr/share/games/fortunes/"
local english = {}
for _, name in ipairs {"fortunes", "wisdom", "people", "science", "computers", "work"} do
  english[#english + 1] = F .. name
end
local languages = {english, F .. "de", F .. "it", F .. "es", F .. "brasil"}

-- Every 5th cookie of a language is a test cookie; majority: the largest class of the test set.
local train_rows, test_rows, train_texts, majority = {}, {}, {}, 0
for label, files in ipairs(languages) do
  local i = 0
  for text in data.fortunes(files):take(per_language):iter() do
    i = i + 1
    table.insert(i % 5 == 0 and test_rows or train_rows, {text = text, label = label - 1})
    if i % 5 ~= 0 then train_texts[#train_texts + 1] = text end
  end
  majority = math.max(majority, i // 5)
end
local vocab = data.Vocabulary.build(train_texts, {level = "char", min_count = 2})

-- One (i32[len] ids, label) element per row, rows sorted by length (ties in a seeded random
-- order) so that a batch holds cookies of similar length and pads little.
math.randomseed(1)
local function dataset(rows)
  for _, row in ipairs(rows) do
    row.ids = vocab:encode(row.text, {max_len = MAX_LEN})
    row.key = row.ids.shape[1] + math.random()
  end
  table.sort(rows, function(a, b) return a.key < b.key end)
  return data.range(#rows):map(function(i)
    local row = rows[i:item() + 1]
    return row.ids, row.label
  end, {host = true})
end
-- The batches are made once, kept (cache), and shuffled every epoch.
local train = dataset(train_rows):padded_batch(64, {pad_to_multiple_of = MULTIPLE,
  drop_remainder = true}):cache():shuffle(1000, {seed = 1})
local test = dataset(test_rows):padded_batch(200, {pad_to_multiple_of = MULTIPLE}):cache()

-- Character and position embeddings, one encoder block, the mean over the real characters
-- (padding, id 0, is masked in attention and in the mean), then the language logits.
local Classifier = nn.Module:extend("LanguageClassifier")
function Classifier:__init(vocab_size, classes, dim)
  self:init_common({})
  self.dim, self.embedding = dim, nn.Embedding(vocab_size, dim)
  self.encoder = nn.TransformerEncoder {num_heads = 2, intermediate_dim = 2 * dim}
  self.logits = nn.Dense(classes)
  self.modules = {self.embedding, self.encoder, self.logits}
end
function Classifier:build(_shape)
  self:add_weight {name = "position", shape = {MAX_LEN, self.dim}, initializer = "random_normal"}
end
function Classifier:call(ids, ctx)
  local b, len, mask = ids.shape[1], ids.shape[2], ids:ne(0)
  local h = self.embedding(ids, ctx) + self.position:slice {{1, len}}
  h = self.encoder({h, mask = mask}, ctx)
  local m = mask:cast("f32"):reshape({b, len, 1})
  return self.logits((h * m):sum(2) / m:sum(2), ctx)
end

local model = Classifier(vocab:size(), #languages, 64)
model:compile {optimizer = optim.Adam {lr = 2e-3}, loss = "sparse_categorical_crossentropy",
               metrics = {"accuracy"}}
print(string.format("%d train and %d test cookies, %s", #train_rows, #test_rows, tostring(vocab)))
model:fit(train, {epochs = EPOCHS, validation_data = test})
print(string.format("test accuracy: %.4f (majority class: %.4f)",
  model:evaluate(test, {verbose = 0}).accuracy, majority / #test_rows))

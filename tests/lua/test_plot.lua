-- Tests of tpu.plot: the SVG of a history (well-formed XML, one panel per quantity, a point per
-- finite value), csv_logger files and `tputrain plot`.
local tpu = require "tpu"
local check = require "check"
local plot = require "tpu.plot"
local cb = require "tpu.callbacks"

local T = {}

local files = require "files"
local tmpdir, read = files.tmpdir, files.must_read

local function count(s, pattern) return select(2, s:gsub(pattern, "")) end

local function exe()
  local p = io.popen("readlink /proc/$PPID/exe")
  local path = p:read("l")
  p:close()
  return path
end

-- Parses the file with Python's XML parser: the SVG must be well-formed for browsers.
local function well_formed(path)
  local ok = os.execute(string.format(
    "/usr/bin/python3 -c 'import sys, xml.etree.ElementTree as E; E.parse(sys.argv[1])' %q 2>/dev/null", path))
  return ok == true
end

local HISTORY = {
  history = {loss = {0.9, 0.6, 0.5, 0.45}, accuracy = {0.6, 0.75, 0.8, 0.82},
             val_loss = {0.7, 0.55, 0/0, 0.52}, val_accuracy = {0.7, 0.78, 0.79, 0.8}},
  keys = {"loss", "accuracy", "val_loss", "val_accuracy"},
  epoch = {1, 2, 3, 4},
}

function T.history_svg_has_a_panel_per_quantity()
  local dir = tmpdir()
  check.eq(plot.history(HISTORY, dir .. "/h.svg", {title = "a <b> & c"}), dir .. "/h.svg")
  local svg = read(dir .. "/h.svg")
  check.is_true(well_formed(dir .. "/h.svg"), "well-formed XML")
  check.is_true(svg:find('<svg xmlns="http://www.w3.org/2000/svg" width="920" height="356"', 1, true) ~= nil)
  check.is_true(svg:find(">a &lt;b&gt; &amp; c</text>", 1, true) ~= nil, "titles are escaped")
  check.is_true(svg:find(">loss</text>", 1, true) < svg:find(">accuracy</text>", 1, true))
  check.eq(count(svg, ">train</text>"), 2)
  check.eq(count(svg, ">validation</text>"), 2)
  check.eq(count(svg, "<circle "), 8, "a marker per training value")
  check.eq(count(svg, "<rect x=\"[%d.]+\" y=\"[%d.]+\" width=\"6\""), 7, "the NaN validation loss is left out")
  check.eq(count(svg, "stroke%-dasharray"), 4, "two dashed curves and two dashed legend lines")
  check.is_true(svg:find('d="M[%d. ]+L[%d. ]+M') ~= nil, "the curve breaks at the missing value")
  check.eq(count(svg, ">epoch</text>"), 2)
  for _, tick in ipairs {">0.5</text>", ">0.9</text>", ">0.80</text>", ">4</text>"} do
    check.is_true(svg:find(tick, 1, true) ~= nil, tick)
  end
  os.execute("rm -rf " .. dir)
end

function T.history_plot_draws_what_fit_returned()
  local dir = tmpdir()
  local x = tpu.random.normal(tpu.random.key(4), {32, 3})
  local ds = tpu.data.from_tensors {x, (x:sum(2):gt(0)):cast("i32")}:batch(8)
  local m = tpu.nn.Sequential {tpu.nn.Dense(2)}
  m:compile {optimizer = tpu.optim.SGD {lr = 0.1}, loss = "sparse_categorical_crossentropy", metrics = {"accuracy"}}
  local history = m:fit(ds, {epochs = 3, verbose = 0, validation_data = ds})
  check.eq(history:plot(dir .. "/fit.svg"), dir .. "/fit.svg")
  check.is_true(well_formed(dir .. "/fit.svg"))
  local svg = read(dir .. "/fit.svg")
  check.eq(count(svg, "<circle "), 6, "a marker per training value of loss and accuracy")
  check.eq(count(svg, ">validation</text>"), 2)
  check.is_true(tpu.plot == plot, "tpu.plot loads on first use")
  os.execute("rm -rf " .. dir)
end

function T.plain_tables_and_single_epochs_plot()
  local svg = plot.svg({loss = {2}, val_loss = {3}})
  check.eq(count(svg, "<circle "), 1)
  check.is_true(svg:find('width="460"', 1, true) ~= nil, "one panel")
  local flat = plot.svg({loss = {1, 1, 1}})
  check.is_true(flat:find(">1.10</text>", 1, true) ~= nil, "a constant curve gets a range around it")
  local many = {}
  for i = 1, 40 do many[i] = 1 / i end
  local long = plot.svg({loss = many})
  check.is_true(long:find(">40</text>", 1, true) ~= nil and long:find(">3</text>", 1, true) == nil, "fewer x ticks")
  check.raises(function() plot.svg({}) end, "plot.svg: the history has no values to plot")
  -- errors name the function called (plot.svg said plot.history) and a value that is no list
  check.raises(function() plot.svg(5) end, "plot.svg: expected the history fit returns, got number")
  check.raises(function() plot.svg({loss = 3}) end, "plot.svg: 'loss' is not a list of numbers")
  check.raises(function() plot.history({}, "h.svg") end, "plot.history: the history has no values to plot")
  check.raises(function() plot.history(HISTORY, "/no/such/dir/h.svg") end, "cannot write /no/such/dir/h.svg")
end

function T.csv_logger_files_plot_from_lua_and_the_command_line()
  local dir = tmpdir()
  local log = cb.csv_logger {path = dir .. "/log.csv"}
  log:on_train_begin({})
  for e = 1, 3 do log:on_epoch_end(e, {loss = 1 / e, accuracy = 1 - 1 / (e + 1), val_loss = 1.2 / e}) end
  log:on_train_end({})
  local h = plot.read_csv(dir .. "/log.csv")
  check.eq(h.keys, {"accuracy", "loss", "val_loss"})
  check.eq(h.epoch, {1, 2, 3})
  check.near(h.history.loss, {1, 0.5, 1 / 3}, 1e-8)
  plot.csv(dir .. "/log.csv", dir .. "/a.svg")
  check.is_true(well_formed(dir .. "/a.svg"))
  local svg = read(dir .. "/a.svg")
  check.is_true(svg:find(">loss</text>", 1, true) < svg:find(">accuracy</text>", 1, true), "loss first")
  local ok = os.execute(string.format("%q plot %q %q", exe(), dir .. "/log.csv", dir .. "/b.svg"))
  check.is_true(ok == true)
  check.eq(read(dir .. "/b.svg"), svg)
  local f = assert(io.open(dir .. "/bad.csv", "wb"))
  f:write("epoch,loss\n1,0.5\n2,abc\n")
  f:close()
  check.raises(function() plot.read_csv(dir .. "/bad.csv") end, dir .. "/bad.csv:3: 'abc' in column 'loss' is not a number")
  f = assert(io.open(dir .. "/other.csv", "wb"))
  f:write("a,b\n1,2\n")
  f:close()
  check.raises(function() plot.read_csv(dir .. "/other.csv") end, "is not a csv_logger file")
  check.raises(function() plot.read_csv(dir .. "/none.csv") end, "plot: cannot read " .. dir .. "/none.csv")
  os.execute("rm -rf " .. dir)
end

return T

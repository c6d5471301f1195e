-- A malformed CSV row is an error naming the file, line and column (here a row with a field
-- missing), after the script's own file:line.
local tpu = require "tpu"
print("reading data/iris_bad.csv")
local iris = tpu.data.csv("data/iris_bad.csv", {label = "species",
  label_classes = {"setosa", "versicolor", "virginica"}})
print(iris:cardinality())

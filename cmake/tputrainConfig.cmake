# find_package(tputrain) for a C or C++ host: the imported target tputrain::tputrain brings
# tputrain.h, libtputrain.so and Lua 5.4 (Debian's liblua5.4-dev, found through pkg-config).
include(CMakeFindDependencyMacro)
find_dependency(PkgConfig)
pkg_check_modules(TPUTRAIN_LUA REQUIRED IMPORTED_TARGET lua5.4)

get_filename_component(_tputrain_prefix "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
if(NOT TARGET tputrain::tputrain)
  add_library(tputrain::tputrain SHARED IMPORTED)
  set_target_properties(tputrain::tputrain PROPERTIES
    IMPORTED_LOCATION "${_tputrain_prefix}/lib/libtputrain.so.0"
    IMPORTED_SONAME "libtputrain.so.0"
    INTERFACE_INCLUDE_DIRECTORIES "${_tputrain_prefix}/include"
    INTERFACE_LINK_LIBRARIES PkgConfig::TPUTRAIN_LUA)
endif()
unset(_tputrain_prefix)

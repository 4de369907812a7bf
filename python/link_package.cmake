# Links every entry of the package directory SRC into DST (the build tree's
# copy of the package, where the extension module is built).
file(MAKE_DIRECTORY ${DST})
file(GLOB entries RELATIVE ${SRC} ${SRC}/*)
foreach(e IN LISTS entries)
  if(e STREQUAL "__pycache__")
    continue()
  endif()
  if(NOT IS_SYMLINK ${DST}/${e})
    file(CREATE_LINK ${SRC}/${e} ${DST}/${e} SYMBOLIC)
  endif()
endforeach()

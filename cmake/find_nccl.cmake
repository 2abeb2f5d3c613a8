# find_nccl.cmake: zb_find_nccl() looks for NCCL's header and library in NCCL_HOME, the CUDA
# toolkit, the system, then the nvidia-nccl Python package that PyTorch installs, and says
# which it took. A GPU machine with PyTorch but no NCCL development package has NCCL only there.

# The library by its soname too: the Python package ships libnccl.so.2 and no libnccl.so link.
set(ZB_NCCL_NAMES nccl libnccl.so.2)

# Where the nvidia-nccl Python package may keep nccl.h and libnccl.so.2: nvidia/nccl/ in the
# CUDA 12 and 13 wheels (nvidia-nccl-cu12, nvidia-nccl-cu13), nvidia/cu13/ in the layout the
# newer NVIDIA wheels use. `nvidia` is a namespace package, so every site folder is asked.
function(zb_python_nccl_roots python out)
  set(roots "")
  if(python)
    execute_process(COMMAND "${python}" -c "import nvidia; print(';'.join(nvidia.__path__))"
                    OUTPUT_VARIABLE sites OUTPUT_STRIP_TRAILING_WHITESPACE
                    RESULT_VARIABLE rc ERROR_QUIET)
    if(rc EQUAL 0)
      foreach(site IN LISTS sites)
        list(APPEND roots "${site}/nccl" "${site}/cu13" "${site}/cu12")
      endforeach()
    endif()
  endif()
  set(${out} "${roots}" PARENT_SCOPE)
endfunction()

# zb_try_nccl(LABEL INCLUDE_DIRS LIBRARY_DIRS) sets NCCL_INCLUDE_DIR, NCCL_LIBRARY and
# NCCL_SOURCE (where they came from) in the caller when those folders hold both; does nothing
# when an earlier try already found them.
macro(zb_try_nccl label incdirs libdirs)
  if(NOT NCCL_SOURCE)
    find_path(_zb_nccl_inc nccl.h PATHS ${incdirs} NO_DEFAULT_PATH NO_CACHE)
    find_library(_zb_nccl_lib NAMES ${ZB_NCCL_NAMES} PATHS ${libdirs} NO_DEFAULT_PATH NO_CACHE)
    if(_zb_nccl_inc AND _zb_nccl_lib)
      set(NCCL_INCLUDE_DIR "${_zb_nccl_inc}")
      set(NCCL_LIBRARY "${_zb_nccl_lib}")
      set(NCCL_SOURCE "${label}")
    endif()
    unset(_zb_nccl_inc)
    unset(_zb_nccl_lib)
  endif()
endmacro()

# A prefix's folders: include/ and the usual library folders.
macro(zb_try_nccl_prefix label prefix)
  zb_try_nccl("${label}" "${prefix}/include"
              "${prefix}/lib;${prefix}/lib64;${prefix}/lib/x86_64-linux-gnu")
endmacro()

# zb_find_nccl(PYTHON TOOLKIT_INCLUDE_DIRS TOOLKIT_LIBRARY_DIRS): NCCL_INCLUDE_DIR and
# NCCL_LIBRARY given with -D win; otherwise the first of NCCL_HOME (variable or environment),
# the CUDA toolkit's folders, /usr, and PYTHON's nvidia-nccl package. Both land in the cache
# (tools/run_manifest.py reads them there for the versions); NCCL_SOURCE says where they came from,
# NCCL_VERSION what nccl.h says.
macro(zb_find_nccl python toolkit_incdirs toolkit_libdirs)
  set(NCCL_SOURCE "")
  if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    # Found by an earlier configure of this build, or given by the user.
    if(NCCL_LIBRARY STREQUAL "${_ZB_NCCL_FOUND_LIBRARY}")
      set(NCCL_SOURCE "${_ZB_NCCL_FOUND_SOURCE}")
    else()
      set(NCCL_SOURCE "-DNCCL_INCLUDE_DIR and -DNCCL_LIBRARY")
    endif()
  else()
    set(_zb_nccl_home "${NCCL_HOME}")
    if(NOT _zb_nccl_home)
      set(_zb_nccl_home "$ENV{NCCL_HOME}")
    endif()
    if(_zb_nccl_home)
      zb_try_nccl_prefix("NCCL_HOME (${_zb_nccl_home})" "${_zb_nccl_home}")
    endif()
    unset(_zb_nccl_home)
    if(NOT "${toolkit_incdirs}" STREQUAL "")
      zb_try_nccl("the CUDA toolkit" "${toolkit_incdirs}" "${toolkit_libdirs}")
    endif()
    if(NOT DEFINED ZB_NCCL_SYSTEM_PREFIX)
      set(ZB_NCCL_SYSTEM_PREFIX /usr)  # a variable only so that the test can move it
    endif()
    zb_try_nccl_prefix("the system (${ZB_NCCL_SYSTEM_PREFIX})" "${ZB_NCCL_SYSTEM_PREFIX}")
    zb_python_nccl_roots("${python}" _zb_nccl_roots)
    foreach(_zb_root IN LISTS _zb_nccl_roots)
      zb_try_nccl_prefix("the nvidia-nccl Python package (${_zb_root})" "${_zb_root}")
    endforeach()
    unset(_zb_nccl_roots)
    if(NCCL_SOURCE)
      set(NCCL_INCLUDE_DIR "${NCCL_INCLUDE_DIR}" CACHE PATH "Folder of nccl.h" FORCE)
      set(NCCL_LIBRARY "${NCCL_LIBRARY}" CACHE FILEPATH "NCCL's shared library" FORCE)
      set(_ZB_NCCL_FOUND_LIBRARY "${NCCL_LIBRARY}" CACHE INTERNAL "")
      set(_ZB_NCCL_FOUND_SOURCE "${NCCL_SOURCE}" CACHE INTERNAL "")
    endif()
  endif()
  set(NCCL_VERSION "")
  if(NCCL_SOURCE AND EXISTS "${NCCL_INCLUDE_DIR}/nccl.h")
    file(STRINGS "${NCCL_INCLUDE_DIR}/nccl.h" _zb_nccl_defs
         REGEX "^#define NCCL_(MAJOR|MINOR|PATCH) +[0-9]+")
    foreach(_zb_part MAJOR MINOR PATCH)
      string(REGEX REPLACE ".*#define NCCL_${_zb_part} +([0-9]+).*" "\\1" _zb_v "${_zb_nccl_defs}")
      list(APPEND NCCL_VERSION "${_zb_v}")
    endforeach()
    list(JOIN NCCL_VERSION "." NCCL_VERSION)
    unset(_zb_nccl_defs)
    unset(_zb_v)
  endif()
endmacro()

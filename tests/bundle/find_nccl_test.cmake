# find_nccl_test.cmake (cmake -P): cmake/find_nccl.cmake on made-up folders: NCCL_HOME before
# the toolkit, the toolkit before the Python package, the package's lone libnccl.so.2 accepted,
# and nothing found where nothing is. Needs -DZB_ROOT, -DZB_PYTHON and -DWORK (a scratch folder).
cmake_minimum_required(VERSION 3.24)
include(${ZB_ROOT}/cmake/find_nccl.cmake)

file(REMOVE_RECURSE ${WORK})
# A toolkit with the development link, a Python site folder holding only what the
# nvidia-nccl-cu13 wheel holds (nccl.h and libnccl.so.2), an NCCL_HOME, an empty /usr.
function(zb_fake_nccl prefix libname)
  file(WRITE ${prefix}/include/nccl.h
       "#define NCCL_MAJOR 2\n#define NCCL_MINOR 28\n#define NCCL_PATCH 9\n")
  file(WRITE ${prefix}/lib/${libname} "")
endfunction()
zb_fake_nccl(${WORK}/toolkit libnccl.so)
zb_fake_nccl(${WORK}/site/nvidia/nccl libnccl.so.2)
zb_fake_nccl(${WORK}/home libnccl.so)
file(MAKE_DIRECTORY ${WORK}/usr)
set(ZB_NCCL_SYSTEM_PREFIX ${WORK}/usr)
set(ENV{PYTHONPATH} ${WORK}/site)
unset(ENV{NCCL_HOME})

# expect(CASE SOURCE_REGEX LIBRARY): one configure's worth of searching, from an empty cache.
macro(expect name source_regex library)
  unset(NCCL_INCLUDE_DIR)
  unset(NCCL_LIBRARY)
  unset(NCCL_INCLUDE_DIR CACHE)
  unset(NCCL_LIBRARY CACHE)
  zb_find_nccl("${python}" "${toolkit_inc}" "${toolkit_lib}")
  if(NOT "${NCCL_SOURCE}" MATCHES "${source_regex}" OR NOT "${NCCL_LIBRARY}" STREQUAL "${library}")
    message(FATAL_ERROR "${name}: found '${NCCL_LIBRARY}' from '${NCCL_SOURCE}'; "
                        "expected '${library}' from a source matching '${source_regex}'")
  endif()
  message(STATUS "${name}: NCCL ${NCCL_VERSION} from ${NCCL_SOURCE}: ${NCCL_LIBRARY}")
endmacro()

set(python ${ZB_PYTHON})
set(toolkit_inc ${WORK}/toolkit/include)
set(toolkit_lib ${WORK}/toolkit/lib)
expect("toolkit first" "^the CUDA toolkit$" ${WORK}/toolkit/lib/libnccl.so)
if(NOT NCCL_VERSION STREQUAL "2.28.9")
  message(FATAL_ERROR "NCCL_VERSION read from nccl.h is '${NCCL_VERSION}', not 2.28.9")
endif()

set(ENV{NCCL_HOME} ${WORK}/home)
expect("NCCL_HOME first" "^NCCL_HOME" ${WORK}/home/lib/libnccl.so)
unset(ENV{NCCL_HOME})

# A toolkit without NCCL, as on the GPU machine: PyTorch's package, soname only.
set(toolkit_inc ${WORK}/usr/include)
set(toolkit_lib ${WORK}/usr/lib)
expect("Python package" "^the nvidia-nccl Python package" ${WORK}/site/nvidia/nccl/lib/libnccl.so.2)

# No python3 to ask (and so no package, whatever this machine has installed).
set(python "")
expect("nowhere" "^$" "")

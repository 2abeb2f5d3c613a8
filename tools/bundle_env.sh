# Sourced, not run: `source tools/bundle_env.sh DIR` puts the Open MPI, Google Benchmark and
# GoogleTest of a bundle made by tools/gpu_bundle.sh in front of anything the system has, and
# sets zb_bundle_cmake_args, the cmake options that point the configure step at them.
# Returns 1 with one line on stderr when DIR is not a complete bundle.

zb_bundle=${1:?usage: source tools/bundle_env.sh BUNDLE_DIR}
if [[ ! -f $zb_bundle/MANIFEST || ! -x $zb_bundle/openmpi/bin/mpicxx ]]; then
  echo "bundle_env: $zb_bundle is not a complete bundle (no MANIFEST or openmpi/bin/mpicxx): make it with tools/gpu_bundle.sh" >&2
  return 1
fi
zb_bundle=$(cd "$zb_bundle" && pwd)
zb_bundle_libdir=$zb_bundle/sys/usr/lib/x86_64-linux-gnu

# The wheel's Open MPI was built for another prefix; OPAL_PREFIX tells libmpi, mpicxx and
# mpirun where it lives now (its help texts, its MCA parameter files, prterun for mpirun).
export OPAL_PREFIX=$zb_bundle/openmpi
export PATH=$zb_bundle/openmpi/bin:$PATH
# The binaries carry run paths to both folders already; this covers whatever is started
# without them (tests discovered at build time, tools that load libmpi).
export LD_LIBRARY_PATH=$zb_bundle/openmpi/lib:$zb_bundle_libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export CMAKE_PREFIX_PATH=$zb_bundle/sys/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
# The config folders by name as well: a CMake that does not search lib/x86_64-linux-gnu (no
# multiarch on that distribution) still finds them.
zb_bundle_cmake_args=(
  "-DMPI_CXX_COMPILER=$zb_bundle/openmpi/bin/mpicxx"
  "-Dbenchmark_DIR=$zb_bundle_libdir/cmake/benchmark"
  "-DGTest_DIR=$zb_bundle_libdir/cmake/GTest"
)

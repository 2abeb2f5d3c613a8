# Run at every build (cmake -P): writes OUT, a header defining ZB_GIT_REVISION as the source
# tree's revision ("-dirty" with uncommitted changes to tracked files, "unknown" outside git),
# and rewrites it only when that changes, so results name the revision that was built rather
# than the one that was first configured.
execute_process(COMMAND git rev-parse --short HEAD WORKING_DIRECTORY ${SRC}
                OUTPUT_VARIABLE rev OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT rev)
  set(rev unknown)
else()
  execute_process(COMMAND git status --porcelain --untracked-files=no WORKING_DIRECTORY ${SRC}
                  OUTPUT_VARIABLE changes OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(changes)
    set(rev "${rev}-dirty")
  endif()
endif()
set(text "// Written by cmake/revision.cmake at build time.\n#pragma once\n#define ZB_GIT_REVISION \"${rev}\"\n")
set(old "")
if(EXISTS ${OUT})
  file(READ ${OUT} old)
endif()
if(NOT old STREQUAL text)
  file(WRITE ${OUT} "${text}")
endif()

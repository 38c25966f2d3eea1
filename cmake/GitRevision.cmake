# Generates git_revision.cpp at build time (not only at configure time), rewriting it only when the
# revision changes, so that every result records the revision the binary was actually built from.
set(WACO_GIT_REVISION_CPP "${CMAKE_BINARY_DIR}/generated/git_revision.cpp")
add_custom_target(waco_git_revision
  COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${CMAKE_SOURCE_DIR} -DOUTPUT=${WACO_GIT_REVISION_CPP}
          -P ${CMAKE_SOURCE_DIR}/cmake/WriteGitRevision.cmake
  BYPRODUCTS ${WACO_GIT_REVISION_CPP}
  COMMENT "Recording git revision")

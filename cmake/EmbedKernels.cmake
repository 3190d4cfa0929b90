# moejit_embed_kernels(OUT file1.cuh file2.cuh ...)
# Writes OUT, a C++ file defining moejit::codegen::embedded_kernel_sources():
# one {name, text} pair per kernel source, the text as a byte array (no raw-string
# delimiter can clash with CUDA source). Regenerated when any source changes.
function(moejit_embed_kernels out)
  set(srcs ${ARGN})
  string(REPLACE ";" "|" srcs_arg "${srcs}")  # a list would split the command line
  add_custom_command(
    OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -DOUT=${out} "-DSRCS=${srcs_arg}" -DNS=moejit::codegen
            -DFUNC=embedded_kernel_sources
            -P ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/EmbedFiles.cmake
    DEPENDS ${srcs} ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/EmbedFiles.cmake
    COMMENT "Embedding kernel sources" VERBATIM)
endfunction()

# moejit_embed_models(OUT models/<name>/config.json ...)
# Embeds the Hugging Face config.json files under models/ so that
# `moejit-prewarm --model NAME` needs no file at run time. The name of an entry
# is its folder name (gpt-oss-120b, ...).
function(moejit_embed_models out)
  set(srcs ${ARGN})
  string(REPLACE ";" "|" srcs_arg "${srcs}")  # a list would split the command line
  add_custom_command(
    OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -DOUT=${out} "-DSRCS=${srcs_arg}" -DNS=moejit::model
            -DFUNC=embedded_model_configs -DNAME_FROM_DIR=ON
            -P ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/EmbedFiles.cmake
    DEPENDS ${srcs} ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/EmbedFiles.cmake
    COMMENT "Embedding model configs" VERBATIM)
endfunction()

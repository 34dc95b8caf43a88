# Writes OUT: a C++ file defining lathe::EmbeddedFiles() with the text of
# every DATA_DIR/*.yaml (sorted, so the output is reproducible).
file(GLOB FILES ${DATA_DIR}/*.yaml)
list(SORT FILES)
set(body "// Generated from data/ by cmake/embed.cmake. Do not edit.\n#include \"lathe/common/embedded.h\"\nnamespace lathe {\nconst std::vector<EmbeddedFile>& EmbeddedFiles() {\n  static const std::vector<EmbeddedFile> files = {\n")
foreach(f ${FILES})
  get_filename_component(name ${f} NAME)
  file(READ ${f} content)
  string(APPEND body "    {\"${name}\", R\"LATHE_EMBED(${content})LATHE_EMBED\"},\n")
endforeach()
string(APPEND body "  };\n  return files;\n}\n}  // namespace lathe\n")
file(WRITE ${OUT}.tmp "${body}")
file(RENAME ${OUT}.tmp ${OUT})

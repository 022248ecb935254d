# cmake -DIN=file.o -DOUT=file.c -P bin2c.cmake: @IN's bytes as the
# definitions xdp_obj.h declares.
file(READ ${IN} hex HEX)
string(LENGTH "${hex}" n)
math(EXPR len "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
string(REGEX REPLACE "((0x..,){16})" "\\1\n\t" body "${body}")
file(WRITE ${OUT} "/* Generated from xdp_prog.bpf.c by bin2c.cmake. */\n"
  "#include \"xdp_obj.h\"\n\n"
  "const unsigned char qps_xdp_prog_obj[] = {\n\t${body}\n};\n"
  "const size_t qps_xdp_prog_obj_len = ${len};\n")

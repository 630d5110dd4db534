# cmake -DOUT=file -DIN=a.md,b.md -P ConcatDocs.cmake: OUT is the files of
# IN one after another (the pass reference of every stage in one page).
file(WRITE ${OUT} "")
string(REPLACE "," ";" IN "${IN}")
foreach(f ${IN})
  file(READ ${f} text)
  file(APPEND ${OUT} "${text}\n")
endforeach()

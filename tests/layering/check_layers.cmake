# The layers' one-way rule, checked by CTest ("layers: ..."): the sources and headers of a layer
# include rosetta headers of itself and of the layers below it only,
#
#   core <- autograd <- nn <- optim, data <- train <- translator <- report (<- apps)
#
# (optim is on autograd, data on core alone), and the code of train/, which trains any
# nn::Module, names no model, data or page in particular: no data::, translator:: or report::,
# no Transformer, Tokenizer, BLEU or HTML outside its comments.
#
#   cmake -DROOT=<source tree> -P tests/layering/check_layers.cmake
# Fails (a fatal error) listing every violation, FILE:LINE: what.
cmake_minimum_required(VERSION 3.25)
if(NOT ROOT)
  message(FATAL_ERROR "usage: cmake -DROOT=<source tree> -P check_layers.cmake")
endif()

set(below_core "")
set(below_autograd core)
set(below_nn core autograd)
set(below_optim core autograd)
set(below_data core)
set(below_train core autograd nn optim)
set(below_translator core autograd nn optim data train)
set(below_report core autograd nn optim data train translator)
# Headers of a layer below that train/ still must not include: the models in particular.
set(banned_in_train rosetta/nn/transformer.h rosetta/nn/search.h)
set(words_banned_in_train "data::" "translator::" "report::" "Transformer" "Tokenizer" "bleu" "BLEU" "html" "HTML")

set(violations "")
set(checked 0)
foreach(layer core autograd nn optim data train translator report)
  file(GLOB_RECURSE files "${ROOT}/${layer}/*.h" "${ROOT}/${layer}/*.cpp")
  foreach(file ${files})
    math(EXPR checked "${checked} + 1")
    file(RELATIVE_PATH where "${ROOT}" "${file}")
    file(STRINGS "${file}" lines)
    set(n 0)
    foreach(line IN LISTS lines)
      math(EXPR n "${n} + 1")
      if(line MATCHES "^[ \t]*#[ \t]*include[ \t]*[\"<](rosetta/[^\">]*)[\">]")
        set(header "${CMAKE_MATCH_1}")
        if(header MATCHES "^rosetta/([a-z_]+)/")
          set(dep "${CMAKE_MATCH_1}")
          if(NOT dep STREQUAL layer AND NOT dep IN_LIST below_${layer})
            list(APPEND violations "${where}:${n}: ${layer} includes ${header} (layer ${dep} is not below it)")
          endif()
        else()
          list(APPEND violations "${where}:${n}: ${layer} includes ${header} (not a header of a layer)")
        endif()
        if(layer STREQUAL "train" AND header IN_LIST banned_in_train)
          list(APPEND violations "${where}:${n}: train includes ${header} (train knows no model in particular)")
        endif()
      elseif(layer STREQUAL "train")
        string(REGEX REPLACE "//.*$" "" code "${line}")
        foreach(word ${words_banned_in_train})
          string(FIND "${code}" "${word}" at)
          if(at GREATER -1)
            list(APPEND violations "${where}:${n}: train's code names ${word}")
          endif()
        endforeach()
      endif()
    endforeach()
  endforeach()
endforeach()

if(checked EQUAL 0)
  message(FATAL_ERROR "no sources under ${ROOT}")
endif()
if(violations)
  list(JOIN violations "\n  " text)
  message(FATAL_ERROR "layering violations:\n  ${text}")
endif()
message(STATUS "layers: ${checked} files include only their own layer and those below it")

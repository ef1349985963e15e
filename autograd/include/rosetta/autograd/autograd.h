// The autograd layer: Var, the backward engine, differentiable ops and gradcheck.
#pragma once

#include "rosetta/autograd/functions.h"
#include "rosetta/autograd/gradcheck.h"
#include "rosetta/autograd/var.h"

// The optim layer: optimizers over flat buffers, learning-rate schedules, gradient clipping.
#pragma once

#include "rosetta/optim/optimizer.h"
#include "rosetta/optim/schedule.h"

NUM_TRACERS = 48
NUM_VORTICES = 4
DT = 0.02
# production horizon; the unit tests run with HORIZON = 32
HORIZON = 160
# cap on the number of live state buffers so long horizons fit in GPU memory
MAX_BUFFERS = 64

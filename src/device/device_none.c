/*
 * device_none.c - device.h for builds without CUDA: there is never a device.
 */
#include "device/device.h"

int chorus_device_count(void) {
  return 0;
}
int chorus_device_current(void) {
  return -1;
}
int chorus_device_built(void) {
  return 0;
}

#ifndef FRAMETAP_CYAML_SHIM_H
#define FRAMETAP_CYAML_SHIM_H
#include <yaml.h>
#endif

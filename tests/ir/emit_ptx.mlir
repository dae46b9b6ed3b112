// --emit=ptx prints the PTX that GPU lowering left in gpu.binary objects (assembly format);
// here the binary is given, so this needs neither a GPU nor --adj-lower-gpu.
// RUN: adjit-opt %s --emit=ptx | FileCheck %s

// CHECK: .target sm_90
// CHECK: .visible .entry k(
module attributes {gpu.container_module} {
  gpu.binary @kernels [#gpu.object<#nvvm.target<chip = "sm_90">, assembly = "//\0A.version 7.8\0A.target sm_90\0A.address_size 64\0A.visible .entry k()\0A{\0A\09ret;\0A}\0A">]
}

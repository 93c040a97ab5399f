//! placeholder until the bindings land

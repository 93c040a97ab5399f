//! Telemetry kernels that run on the workers (post-dequeue taps and stages). I/O-free, time
//! passed in, per-worker state; each is zmq-free: it hands its state to the control side
//! (SPSC rings, seqlocked windows), and the control side exports it.

pub mod fridge;
pub mod kestrel;

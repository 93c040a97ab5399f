//! Telemetry kernels that run on the workers (post-dequeue taps). Each is zmq-free: it hands
//! its state to the control side through SPSC rings; the control side exports it.

pub mod kestrel;

"""Recording a model: the tape (symbolic tensors and op records), the record and slot formats,
and the arena layout the compiled loop reads."""

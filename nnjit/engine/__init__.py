"""Running a recorded program: the compiled loop (interpreter, its fields and epoch rule, batch
loading, the builds of op families), the Python driver around it (program) and its statuses."""

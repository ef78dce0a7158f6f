/**
 * Turns off onnxruntime-node's telemetry before the library is loaded. Version 1.30 writes
 * /tmp/mat-debug-<pid>.log and a database under ~/.cache/Microsoft/DeveloperTools/ whenever
 * a session is created, unless ORT_DISABLE_TELEMETRY is set, and it reads the variable when
 * the module loads: setting it in the module that imports onnxruntime-node is too late,
 * because ESM imports are evaluated before the importing module's body. This module has no
 * imports and is imported first by onnxruntime.ts, the only module allowed to load the
 * library (lint forbids importing onnxruntime-node anywhere else).
 *
 * An enclave must not leave files about its work on the host, and has no business phoning
 * anyone; an operator who really wants the telemetry can still set the variable to 0.
 */
process.env.ORT_DISABLE_TELEMETRY ??= '1';

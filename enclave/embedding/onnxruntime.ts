/**
 * The one way into onnxruntime-node. The import order matters: ESM evaluates a module's
 * imports in the order they are written, so ort-no-telemetry.js sets ORT_DISABLE_TELEMETRY
 * before onnxruntime-node is loaded (see there).
 */
import './ort-no-telemetry.js';

export * as ort from 'onnxruntime-node';

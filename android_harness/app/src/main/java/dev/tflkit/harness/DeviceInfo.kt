package dev.tflkit.harness

import android.content.Context
import android.opengl.EGL14
import android.opengl.GLES20
import android.os.Build

/** What result.json says about the phone: model, SoC, Android version, the GPU's GL strings. */
object DeviceInfo {
    fun collect(context: Context): Map<String, Any?> {
        val info = linkedMapOf<String, Any?>(
            "os" to "Android ${Build.VERSION.RELEASE} (API ${Build.VERSION.SDK_INT})",
            "manufacturer" to Build.MANUFACTURER,
            "model" to Build.MODEL,
            "device" to Build.DEVICE,
            "hardware" to Build.HARDWARE,
            "abis" to Build.SUPPORTED_ABIS.toList(),
            "package" to context.packageName,
        )
        if (Build.VERSION.SDK_INT >= 31) {
            info["soc"] = "${Build.SOC_MANUFACTURER} ${Build.SOC_MODEL}"
        }
        info["gpu"] = glStrings()
        return info
    }

    /** GL_RENDERER / GL_VENDOR / GL_VERSION from a throw-away 1x1 pbuffer context. */
    fun glStrings(): Map<String, Any?> = try {
        val display = EGL14.eglGetDisplay(EGL14.EGL_DEFAULT_DISPLAY)
        val version = IntArray(2)
        check(EGL14.eglInitialize(display, version, 0, version, 1)) { "eglInitialize failed" }
        val attribs = intArrayOf(
            EGL14.EGL_RENDERABLE_TYPE, EGL14.EGL_OPENGL_ES2_BIT,
            EGL14.EGL_SURFACE_TYPE, EGL14.EGL_PBUFFER_BIT, EGL14.EGL_NONE,
        )
        val configs = arrayOfNulls<android.opengl.EGLConfig>(1)
        val count = IntArray(1)
        EGL14.eglChooseConfig(display, attribs, 0, configs, 0, 1, count, 0)
        val ctx = EGL14.eglCreateContext(
            display, configs[0], EGL14.EGL_NO_CONTEXT,
            intArrayOf(EGL14.EGL_CONTEXT_CLIENT_VERSION, 2, EGL14.EGL_NONE), 0,
        )
        val surface = EGL14.eglCreatePbufferSurface(
            display, configs[0], intArrayOf(EGL14.EGL_WIDTH, 1, EGL14.EGL_HEIGHT, 1, EGL14.EGL_NONE), 0,
        )
        EGL14.eglMakeCurrent(display, surface, surface, ctx)
        val renderer = GLES20.glGetString(GLES20.GL_RENDERER)
        val result = linkedMapOf<String, Any?>(
            "name" to renderer,
            "vendor" to GLES20.glGetString(GLES20.GL_VENDOR),
            "backend" to GLES20.glGetString(GLES20.GL_VERSION),
            "software" to (renderer?.contains("SwiftShader") == true || renderer?.contains("llvmpipe") == true),
        )
        EGL14.eglMakeCurrent(display, EGL14.EGL_NO_SURFACE, EGL14.EGL_NO_SURFACE, EGL14.EGL_NO_CONTEXT)
        EGL14.eglDestroySurface(display, surface)
        EGL14.eglDestroyContext(display, ctx)
        EGL14.eglTerminate(display)
        result
    } catch (e: Exception) {
        mapOf("error" to oneLine(e))
    }
}

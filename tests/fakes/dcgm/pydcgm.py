"""Fake of DCGM's pydcgm.py: the DcgmHandle class (the real one lives in DcgmHandle.py and is
re-exported by pydcgm). Same constructor, attributes and Shutdown() as NVIDIA's."""

import dcgm_agent
import dcgm_structs


class DcgmHandle:
    def __init__(
        self,
        handle=None,
        ipAddress=None,
        opMode=dcgm_structs.DCGM_OPERATION_MODE_AUTO,
        persistAfterDisconnect=False,
        unixSocketPath=None,
        timeoutMs=0,
    ):
        self._handleCreated = False
        self._persistAfterDisconnect = persistAfterDisconnect
        if handle is not None:
            self.handle = handle
            return
        self._ipAddress = ipAddress
        if ipAddress is not None and unixSocketPath is not None:
            raise dcgm_structs.dcgmExceptionClass(dcgm_structs.DCGM_ST_BADPARAM)
        dcgm_structs._dcgmInit()
        dcgm_agent.dcgmInit()
        if ipAddress is None and unixSocketPath is None:
            self.handle = dcgm_agent.dcgmStartEmbedded(opMode)
            self.isEmbedded = True
            self._handleCreated = True
            return
        connectParams = dcgm_structs.c_dcgmConnectV2Params_v2()
        connectParams.version = dcgm_structs.c_dcgmConnectV2Params_version
        connectParams.timeoutMs = timeoutMs
        connectParams.persistAfterDisconnect = 1 if self._persistAfterDisconnect else 0
        if ipAddress is not None:
            connectToAddress = ipAddress
            connectParams.addressIsUnixSocket = 0
        else:
            connectToAddress = unixSocketPath
            connectParams.addressIsUnixSocket = 1
        self.handle = dcgm_agent.dcgmConnect_v2(connectToAddress, connectParams)
        self.isEmbedded = False
        self._handleCreated = True

    def Shutdown(self):
        if not self._handleCreated:
            return
        if self.isEmbedded:
            dcgm_agent.dcgmStopEmbedded(self.handle)
        else:
            dcgm_agent.dcgmDisconnect(self.handle)
        self._handleCreated = False
        self.handle = None

    def GetIpAddress(self):
        return self._ipAddress
